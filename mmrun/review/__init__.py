"""Reading a run's results: the HTML report, scores against references, two runs compared.

``load`` (load.py) reads any result file into one shape; page.py assembles the HTML page,
with its charts from charts.py and its media embedded by embed.py; score.py scores with
jiwer, sacrebleu and rapidfuzz, compare.py sets two runs side by side. Nothing here imports
vLLM; the heavy libraries are imported where they are used.
"""

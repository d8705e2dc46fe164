"""Reading a run's results: the HTML report, scores against references, two runs compared.

``load`` (load.py) reads any result file into one shape; report.py draws the page, score.py
scores with jiwer, sacrebleu and rapidfuzz, compare.py sets two runs side by side. Nothing
here imports vLLM; the heavy libraries are imported where they are used.
"""

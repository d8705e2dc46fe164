#!/bin/bash
# Device: how mmrun ends on CUDA (tiny Qwen2.5-VL, eager). Three runs back to back: the time
# from the results to exit, engine processes left on the GPU, socket files left in /tmp. Then
# a download that fails (404) 20 s into the engine start, and a start vLLM refuses
# (gpu_memory_utilization 0.999): the error line and the time. Carry .gpu/b .gpu/s .gpu/t
# after callA.sh.
CALL=lifecycle; source "$(dirname "$0")/common.sh"
if [ ! -f /tmp/tiny/.done ]; then mkdir -p /tmp/tiny && xz -dc .gpu/t/tiny.tar.xz | tar xf - -C /tmp/tiny && touch /tmp/tiny/.done; fi
python3 .gpu/s/make_media.py /tmp/media
read -r -a EA <<< "$(python3 -c "import json; r = [r for r in json.load(open('.gpu/t/index.json'))['rows'] if r['row'] == 'image/qwen2_5_vl'][0]; print(' '.join('--engine-arg=%s=%s' % (k, json.dumps(v)) for k, v in r['engine_args'].items()))")"
RUN=(python3 -m mmrun image -m qwen2_5_vl --model /tmp/tiny/image__qwen2_5_vl --max-tokens 16
     --engine-arg enforce_eager=true "${EA[@]}")
sockets() { find /tmp -maxdepth 1 -type s | wc -l; }
gpu_procs() { nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c . ; }
echo "before: gpu processes $(gpu_procs), sockets in /tmp $(sockets)"
for i in 1 2 3; do
  python3 .gpu/s/stamp.py "${RUN[@]}" --engine-arg gpu_memory_utilization=0.3 --json \
    -i /tmp/media/img0.png 2> $RES/run$i.log
  sleep 0.5
  echo "run $i: after exit: gpu processes $(gpu_procs), sockets in /tmp $(sockets)"
done
python3 .gpu/s/slow404.py 8799 & SERVER=$!
sleep 1
t=$(date +%s.%N)
"${RUN[@]}" --engine-arg gpu_memory_utilization=0.3 --quiet -i http://127.0.0.1:8799/20.png \
  > $RES/abort.out 2> $RES/abort.err
rc=$?
echo "404 at 20 s: rc=$rc after $(python3 -c "import time; print(round(time.time() - $t, 1))") s: $(cat $RES/abort.err)"
sleep 0.5; echo "after it: gpu processes $(gpu_procs)"
kill $SERVER
t=$(date +%s.%N)
"${RUN[@]}" --engine-arg gpu_memory_utilization=0.999 --quiet -i /tmp/media/img0.png \
  > $RES/refused.out 2> $RES/refused.err
rc=$?
echo "utilization 0.999: rc=$rc after $(python3 -c "import time; print(round(time.time() - $t, 1))") s: $(cat $RES/refused.err)"
sleep 0.5; echo "after it: gpu processes $(gpu_procs), sockets in /tmp $(sockets)"
tail -3 $RES/run1.log | cut -c1-300
tar czf "$OUT/lifecycle.tgz" -C $RES .

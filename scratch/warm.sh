# cold then warm first call of GPT-2 inference, shared caches; profile of the warm one
export FUSEC_CACHE_DIR=/tmp/wc/fusec TRITON_CACHE_DIR=/tmp/wc/triton TORCHINDUCTOR_CACHE_DIR=/tmp/wc/ind
rm -rf /tmp/wc; mkdir -p /tmp/wc
cd bench
python first_call.py gpt2 infer fusec 2>&1 | tail -1
python first_call.py gpt2 infer fusec --profile /tmp/warm.prof 2>&1 | tail -1
python - <<'PY'
import pstats, io
p = pstats.Stats('/tmp/warm.prof')
s = io.StringIO(); p.stream = s
p.sort_stats('cumulative').print_stats('fusec|triton|cuda', 30)
print("\n".join(l[:150] for l in s.getvalue().splitlines()[8:45]))
PY

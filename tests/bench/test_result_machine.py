"""What every bench result records of the machine that wrote it."""

from __future__ import annotations

import json

import bench.harness as bench_main
from bench.harness import cpu_kind, write_result


def test_the_cpu_kind_names_the_model_and_only_the_matmul_flags(tmp_path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nmodel name\t: AMD EPYC 9R14\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni\n"
        "processor\t: 1\nmodel name\t: AMD EPYC 9R14\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni\n"
    )
    assert cpu_kind(cpuinfo) == {"cpu_model": "AMD EPYC 9R14", "matmul_flags": ["avx512_bf16", "avx512_vnni", "avx2"]}
    cpuinfo.write_text("model name\t: Intel Xeon\nflags\t\t: avx2 amx_bf16 amx_tile avx512_bf16\n")
    assert cpu_kind(cpuinfo)["matmul_flags"] == ["amx_bf16", "avx512_bf16", "avx2"]
    assert cpu_kind(tmp_path / "absent") == {}


def test_a_result_records_the_cpu_kind_beside_the_cpu_count(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(bench_main, "RESULTS", tmp_path)
    machine = json.loads(write_result("probe", {"x": 1}).read_text())["machine"]
    assert machine["cpus"] >= 1 and machine == {**machine, **cpu_kind()}

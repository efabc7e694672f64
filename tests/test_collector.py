from conftest import FakeProfiler, fake_avg

from kernelmagic.collector import collect_rows
from kernelmagic.result import OpRow


def test_rows_copy_torch_figures_and_drop_non_ops():
    prof = FakeProfiler([
        fake_avg("cell[1]", 1, 50.0, 1000.0, user=True),
        fake_avg("cell[1]/iter 0", 1, 20.0, 950.0, user=True),
        fake_avg("aten::mm", 2, 700.0, 710.0, 300.0, 300.0),
        fake_avg("aten::add", 3, 230.0, 230.0),
        fake_avg("[memory]", 5, 0.0, 0.0),
        fake_avg("void gemm_kernel<...>", 2, 0.0, 0.0, 300.0, 300.0, device="CUDA"),
    ])
    assert collect_rows(prof) == [
        OpRow("aten::mm", 2, 700.0, 710.0, 300.0, 300.0),
        OpRow("aten::add", 3, 230.0, 230.0, 0.0, 0.0),
    ]


def test_legacy_cuda_attribute_names():
    """torch releases before the device_* rename only had cuda_* names."""
    from types import SimpleNamespace

    old = SimpleNamespace(key="aten::mm", count=1, self_cpu_time_total=5, cpu_time_total=6,
                          self_cuda_time_total=7, cuda_time_total=8)
    assert collect_rows(FakeProfiler([old])) == [OpRow("aten::mm", 1, 5.0, 6.0, 7.0, 8.0)]

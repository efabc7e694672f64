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


def test_kernels_grouped_with_launching_op():
    from types import SimpleNamespace

    import torch

    from kernelmagic.collector import collect_kernels
    from kernelmagic.result import KernelRow

    cpu = torch.autograd.DeviceType.CPU

    def op(name, *kernels):
        return SimpleNamespace(name=name, device_type=cpu,
                               kernels=[SimpleNamespace(name=k, duration=d) for k, d in kernels])

    prof = SimpleNamespace(function_events=[
        op("aten::mm", ("sgemm_128x64", 40.0)),
        op("aten::mm", ("sgemm_128x64", 44.0)),
        op("aten::addmm", ("sgemm_128x64", 10.0), ("bias_add", 2.0)),
        op("aten::view"),
    ])
    assert collect_kernels(prof) == [
        KernelRow("sgemm_128x64", 3, 94.0, "aten::mm"),
        KernelRow("bias_add", 1, 2.0, "aten::addmm"),
    ]


def test_our_own_synchronize_is_taken_out():
    from types import SimpleNamespace

    import torch

    from kernelmagic.torch_compat import SYNC_RANGE

    cpu = torch.autograd.DeviceType.CPU
    ours = SimpleNamespace(name=SYNC_RANGE, cpu_parent=None, device_type=cpu)

    def sync_event(parent, t):
        return SimpleNamespace(name="cudaDeviceSynchronize", cpu_parent=parent, device_type=cpu,
                               self_cpu_time_total=t, cpu_time_total=t,
                               self_device_time_total=0.0, device_time_total=0.0)

    user_range = SimpleNamespace(name="my range", cpu_parent=None, device_type=cpu)
    prof = FakeProfiler(
        [fake_avg(SYNC_RANGE, 3, 1.0, 301.0, user=True),
         fake_avg("cudaDeviceSynchronize", 4, 340.0, 340.0),
         fake_avg("aten::mm", 3, 30.0, 30.0)],
        events=[sync_event(ours, 100.0), sync_event(ours, 100.0), sync_event(ours, 100.0),
                sync_event(user_range, 40.0)])
    rows = {r.key: r for r in collect_rows(prof)}
    # Three of the four synchronizes were ours: the user's own one stays.
    assert rows["cudaDeviceSynchronize"] == OpRow("cudaDeviceSynchronize", 1, 40.0, 40.0)
    assert rows["aten::mm"].count == 3

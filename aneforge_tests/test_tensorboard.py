"""aneforge.utils.tensorboard.SummaryWriter against torch.utils.tensorboard's: the same calls
write event files TensorBoard reads back with the same tags, steps and values."""
import glob
import io
import os
import sys

import numpy as np
import pytest

import aneforge as af
from aneforge.utils.tensorboard import SummaryWriter

import torch  # noqa: E402
from torch.utils.tensorboard import SummaryWriter as TorchWriter  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402


def _events(log_dir):
    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "histograms": 0,
                                                        "images": 0, "tensors": 0})
    acc.Reload()
    return acc


def _both(tmp_path, write):
    """Runs `write(writer, lib)` with aneforge's and torch's writers; their read-back events."""
    out = []
    for name, writer_cls, lib in (("af", SummaryWriter, af), ("torch", TorchWriter, torch)):
        with writer_cls(str(tmp_path / name)) as writer:
            write(writer, lib)
        out.append(_events(tmp_path / name))
    return out


def test_scalars_read_back_as_torchs(tmp_path):
    def write(w, lib):
        for step in range(5):
            w.add_scalar("loss", lib.tensor(2.0) / (step + 1), step)
            w.add_scalar("lr", 0.1 * 0.5 ** step, global_step=step)
        w.add_scalar("np", np.float32(3.5), 7)
    ours, theirs = _both(tmp_path, write)
    assert sorted(ours.Tags()["scalars"]) == sorted(theirs.Tags()["scalars"]) == ["loss", "lr", "np"]
    for tag in ("loss", "lr", "np"):
        a = [(e.step, e.value) for e in ours.Scalars(tag)]
        b = [(e.step, e.value) for e in theirs.Scalars(tag)]
        assert [s for s, _ in a] == [s for s, _ in b]
        np.testing.assert_allclose([v for _, v in a], [v for _, v in b], rtol=1e-3)


def test_new_style_scalar_is_a_scalars_plugin_tensor(tmp_path):
    def write(w, lib):
        w.add_scalar("x", lib.tensor(1.25), 3, new_style=True)
        w.add_scalar("y", 1.0 / 3, 4, new_style=True, double_precision=True)
    ours, theirs = _both(tmp_path, write)
    for acc in (ours, theirs):
        assert sorted(acc.Tags()["tensors"]) == ["x", "y"]
    for tag in ("x", "y"):
        a, b = ours.Tensors(tag)[0], theirs.Tensors(tag)[0]
        assert (a.step, a.tensor_proto.dtype) == (b.step, b.tensor_proto.dtype)
        assert list(a.tensor_proto.float_val) == list(b.tensor_proto.float_val)
        assert list(a.tensor_proto.double_val) == list(b.tensor_proto.double_val)
        assert ours.SummaryMetadata(tag).plugin_data.plugin_name == "scalars"


@pytest.mark.parametrize("bins,max_bins", [("tensorflow", None), ("auto", None), (10, None),
                                           ("tensorflow", 40)])
def test_histogram_buckets_are_torchs(tmp_path, bins, max_bins):
    values = (np.random.default_rng(0).standard_normal(500) * 3).astype(np.float16).astype(np.float32)

    def write(w, lib):
        w.add_histogram("w", lib.tensor(values), 2, bins=bins, max_bins=max_bins)
    ours, theirs = _both(tmp_path, write)
    a, b = ours.Histograms("w")[0], theirs.Histograms("w")[0]
    assert a.step == b.step == 2
    a, b = a.histogram_value, b.histogram_value
    assert (a.min, a.max, a.num) == (b.min, b.max, b.num)
    np.testing.assert_allclose([a.sum, a.sum_squares], [b.sum, b.sum_squares], rtol=1e-6)
    assert list(a.bucket) == list(b.bucket)
    np.testing.assert_allclose(a.bucket_limit, b.bucket_limit, rtol=1e-9)


def test_add_scalars_writes_a_run_per_tag_as_torch(tmp_path):
    def write(w, lib):
        for step in range(3):
            w.add_scalars("loss", {"train": lib.tensor(1.0 + step), "test": 2.0 * step}, step)
    _both(tmp_path, write)
    ours = sorted(os.listdir(tmp_path / "af"))
    theirs = sorted(os.listdir(tmp_path / "torch"))
    assert [d for d in ours if d.startswith("loss")] == [d for d in theirs
                                                       if d.startswith("loss")] == \
        ["loss_test", "loss_train"]
    got = [(e.step, e.value) for e in _events(tmp_path / "af" / "loss_train").Scalars("loss")]
    assert got == [(0, 1.0), (1, 2.0), (2, 3.0)]


def test_text_image_and_figure_read_back(tmp_path):
    from PIL import Image
    pixels = np.random.default_rng(1).random((3, 8, 6)).astype(np.float16).astype(np.float32)

    def write(w, lib):
        w.add_text("note", "hello **world**", 1)
        w.add_image("img", lib.tensor(pixels), 2)
        w.add_image("grey", (pixels[0] * 255).astype(np.uint8), 2, dataformats="HW")
    ours, theirs = _both(tmp_path, write)
    tag = "note/text_summary"                    # torch's tag for a text
    text = ours.Tensors(tag)[0].tensor_proto.string_val[0]
    assert text == theirs.Tensors(tag)[0].tensor_proto.string_val[0] == b"hello **world**"
    for tag in ("img", "grey"):
        a, b = ours.Images(tag)[0], theirs.Images(tag)[0]
        assert (a.step, a.width, a.height) == (b.step, b.width, b.height)
        ia = np.asarray(Image.open(io.BytesIO(a.encoded_image_string)))
        ib = np.asarray(Image.open(io.BytesIO(b.encoded_image_string)))
        np.testing.assert_array_equal(ia, ib)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(2, 1.5), dpi=50)
    ax.plot([0, 1], [1, 0])
    with SummaryWriter(str(tmp_path / "fig")) as w:
        w.add_figure("plot", fig, 0)
    image = _events(tmp_path / "fig").Images("plot")[0]
    assert (image.width, image.height) == (100, 75)
    assert not plt.fignum_exists(fig.number)


def test_purge_step_and_default_log_dir(tmp_path, monkeypatch):
    with SummaryWriter(str(tmp_path / "p"), purge_step=5) as w:
        w.add_scalar("a", 1.0, 5)
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    events = [e for f in glob.glob(str(tmp_path / "p" / "*"))
              for e in EventFileLoader(f).Load() if isinstance(e, Event)]
    starts = [e for e in events if e.HasField("session_log")]
    assert [(e.step, e.session_log.status) for e in starts] == [(5, 1)]
    monkeypatch.chdir(tmp_path)
    w = SummaryWriter(comment="_exp1")
    w.close()
    assert w.get_logdir().startswith("runs" + os.sep) and w.get_logdir().endswith("_exp1")
    assert os.listdir(w.get_logdir())


def test_bad_values_and_left_out_writers_say_so(tmp_path):
    with SummaryWriter(str(tmp_path)) as w:
        with pytest.raises(ValueError, match=r"add_scalar takes one number.*\(3,\)"):
            w.add_scalar("v", af.ones(3), 0)
        with pytest.raises(ValueError, match="non-finite"):
            w.add_histogram("h", np.array([1.0, np.inf]), 0)
        with pytest.raises(ValueError, match="dataformats"):
            w.add_image("i", np.zeros((2, 3)), 0)
        with pytest.raises(AttributeError, match="add_graph is torch's but not aneforge's"):
            w.add_graph
        with pytest.raises(AttributeError, match="no attribute 'nothing'"):
            w.nothing


def test_missing_tensorboard_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboard.summary.writer.event_file_writer", None)
    with pytest.raises(ImportError, match="pip install tensorboard"):
        SummaryWriter(str(tmp_path))

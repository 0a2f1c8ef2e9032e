"""torch.utils.tensorboard for aneforge: `SummaryWriter` with torch's name, arguments and
defaults, taking aneforge tensors (and numbers, numpy arrays) for its values.

It writes TensorBoard's event files with the `tensorboard` package's own writer and protocol
buffers (`pip install tensorboard`, as torch.utils.tensorboard needs it too); `tensorboard
--logdir runs` shows them. Scalars, scalar groups, histograms, text, images and matplotlib
figures are written; torch's other writers (graphs, embeddings, audio, video, meshes, PR
curves, hparams) are not, and name themselves in an AttributeError.

>>> import aneforge as af, tempfile
>>> from aneforge.utils.tensorboard import SummaryWriter
>>> with SummaryWriter(tempfile.mkdtemp()) as writer:
...     for step in range(3):
...         writer.add_scalar("loss", af.tensor(1.0) / (step + 1), step)
"""
from __future__ import annotations

import io
import os
import socket
import time
from datetime import datetime

import numpy as np

# TensorBoard's default histogram buckets (its generate_testdata.py, which torch follows):
# edges 1e-12 * 1.1**k below 1e20, mirrored for negatives around 0
_EDGES = 1e-12 * 1.1 ** np.arange(int(np.ceil(np.log(1e32) / np.log(1.1))))
_EDGES = _EDGES[_EDGES < 1e20]
_TF_BINS = np.concatenate([-_EDGES[::-1], [0.0], _EDGES])

_LEFT_OUT = ("add_graph", "add_onnx_graph", "add_embedding", "add_audio", "add_video",
             "add_mesh", "add_pr_curve", "add_pr_curve_raw", "add_custom_scalars",
             "add_custom_scalars_multilinechart", "add_custom_scalars_marginchart",
             "add_hparams", "add_images", "add_image_with_boxes", "add_histogram_raw")


def _tensorboard():
    """The tensorboard package's event writer and protocol buffers (imported on first use)."""
    try:
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog
        from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
        from tensorboard.compat.proto.tensor_pb2 import TensorProto
        from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError as e:
        raise ImportError("aneforge.utils.tensorboard writes TensorBoard's event files with the "
                          "tensorboard package, which is not installed: pip install tensorboard "
                          "(torch.utils.tensorboard needs it too)") from e
    return dict(Event=Event, SessionLog=SessionLog, HistogramProto=HistogramProto,
                Summary=Summary, SummaryMetadata=SummaryMetadata, TensorProto=TensorProto,
                TensorShapeProto=TensorShapeProto, EventFileWriter=EventFileWriter)


def _numpy(value) -> np.ndarray:
    """A value's host array: an aneforge (or torch) tensor's data, a number, a list, an array."""
    if hasattr(value, "detach"):
        value = value.detach()
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        value = value.cpu().numpy() if hasattr(value, "cpu") else value.numpy()
    return np.asarray(value)


def _number(value, what: str) -> float:
    array = _numpy(value)
    if array.size != 1:
        raise ValueError(f"{what} takes one number; got a value of shape {tuple(array.shape)} "
                         f"(reduce it first, e.g. .mean(), or log it with add_histogram)")
    return float(array.reshape(()))


def _hwc(image: np.ndarray, dataformats: str) -> np.ndarray:
    """An image's [height, width, channels] array from one laid out as `dataformats` (CHW,
    HWC or HW); one (grey) channel becomes three equal RGB ones, as torch writes it."""
    formats = dataformats.upper()
    if sorted(formats) not in (sorted("CHW"), sorted("HW")) or image.ndim != len(formats):
        raise ValueError(f"add_image takes an image laid out as dataformats={dataformats!r}, "
                         f"got shape {tuple(image.shape)}; use 'CHW', 'HWC' or 'HW'")
    image = image[:, :, None] if formats == "HW" else np.transpose(
        image, [formats.index(c) for c in "HWC"])
    return np.repeat(image, 3, axis=2) if image.shape[2] == 1 else image


class SummaryWriter:
    """Writes TensorBoard event files into `log_dir`, as torch.utils.tensorboard.SummaryWriter.

    Args:
        log_dir: the directory; default `runs/<date>_<time>_<host><comment>`, torch's.
        comment: appended to the default log_dir's name (ignored when log_dir is given).
        purge_step: TensorBoard hides this run's earlier events at and after this step (a
            resumed run's restart), from a session-start event written at this step.
        max_queue, flush_secs, filename_suffix: the event file's queue length, seconds between
            flushes and file-name suffix.

    Values may be aneforge tensors, numpy arrays, numbers (and torch tensors); reading a pending
    tensor's value runs its program, as `.item()` would.

    >>> import aneforge as af, tempfile
    >>> writer = SummaryWriter(tempfile.mkdtemp())
    >>> writer.add_histogram("weights", af.randn(100), global_step=0)
    >>> writer.add_text("note", "first run", 0)
    >>> writer.close()
    """

    def __init__(self, log_dir: str | None = None, comment: str = "",
                 purge_step: int | None = None, max_queue: int = 10, flush_secs: int = 120,
                 filename_suffix: str = ""):
        self._tb = _tensorboard()
        if not log_dir:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = str(log_dir)
        self.purge_step = purge_step
        self.max_queue, self.flush_secs, self.filename_suffix = max_queue, flush_secs, filename_suffix
        self._writer = None
        self._groups: dict[str, SummaryWriter] = {}      # add_scalars' one writer per tag
        self._file()

    def _file(self):
        if self._writer is None:
            self._writer = self._tb["EventFileWriter"](self.log_dir, self.max_queue,
                                                       self.flush_secs, self.filename_suffix)
            if self.purge_step is not None:
                start = self._tb["SessionLog"](status=self._tb["SessionLog"].START)
                self._writer.add_event(self._tb["Event"](step=self.purge_step, wall_time=time.time(),
                                                         session_log=start))
                self.purge_step = None
        return self._writer

    def get_logdir(self) -> str:
        """The directory the event files go to."""
        return self.log_dir

    def _add(self, value, global_step, walltime):
        summary = self._tb["Summary"](value=[value])
        event = self._tb["Event"](summary=summary, wall_time=time.time() if walltime is None
                                  else walltime)
        if global_step is not None:
            event.step = int(_number(global_step, "global_step"))
        self._file().add_event(event)

    def _value(self, **fields):
        return self._tb["Summary"].Value(**fields)

    def add_scalar(self, tag: str, scalar_value, global_step=None, walltime=None,
                   new_style: bool = False, double_precision: bool = False) -> None:
        """Logs one number (a one-element tensor, a Python or numpy number) under `tag`.

        `new_style` writes it as a tensor summary of the scalars plugin (float32, float64 with
        `double_precision`), which TensorBoard loads faster; the default is the simple value."""
        number = _number(scalar_value, "add_scalar")
        if not new_style:
            self._add(self._value(tag=tag, simple_value=number), global_step, walltime)
            return
        tb = self._tb
        tensor = tb["TensorProto"](dtype="DT_DOUBLE" if double_precision else "DT_FLOAT",
                                   tensor_shape=tb["TensorShapeProto"]())
        (tensor.double_val if double_precision else tensor.float_val).append(number)
        meta = tb["SummaryMetadata"](plugin_data=tb["SummaryMetadata"].PluginData(
            plugin_name="scalars"))
        self._add(self._value(tag=tag, tensor=tensor, metadata=meta), global_step, walltime)

    def add_scalars(self, main_tag: str, tag_scalar_dict: dict, global_step=None,
                    walltime=None) -> None:
        """Logs several numbers on one chart: each `tag` into `log_dir/<main_tag>_<tag>`
        under the tag `main_tag`, as torch does."""
        walltime = time.time() if walltime is None else walltime
        for tag, value in tag_scalar_dict.items():
            name = (main_tag.replace("/", "_") + "_" + tag)
            if name not in self._groups:
                self._groups[name] = SummaryWriter(os.path.join(self.log_dir, name),
                                                   max_queue=self.max_queue,
                                                   flush_secs=self.flush_secs,
                                                   filename_suffix=self.filename_suffix)
            self._groups[name].add_scalar(main_tag, value, global_step, walltime)

    def add_histogram(self, tag: str, values, global_step=None, bins="tensorflow",
                      walltime=None, max_bins: int | None = None) -> None:
        """Logs the distribution of `values` (any shape; all must be finite).

        `bins`: "tensorflow" (TensorBoard's default buckets, geometric steps of 1.1 from 1e-12
        to 1e20 on each side of 0), or anything numpy.histogram takes ("auto", a count, edges);
        `max_bins`: when there are more buckets, merges runs of len // max_bins neighbours
        (torch's rule: about max_bins buckets remain)."""
        data = _numpy(values).astype(np.float64).reshape(-1)
        if data.size == 0:
            raise ValueError(f"add_histogram({tag!r}) got no values")
        if not np.isfinite(data).all():
            raise ValueError(f"add_histogram({tag!r}) got non-finite values (inf or NaN); "
                             f"TensorBoard cannot bucket them")
        counts, edges = np.histogram(data, bins=_TF_BINS if isinstance(bins, str)
                                     and bins == "tensorflow" else bins)
        if max_bins is not None and counts.size > max_bins:
            group = counts.size // max_bins
            counts = np.pad(counts, (0, -counts.size % group)).reshape(-1, group).sum(1)
            edges = np.append(edges[:-1:group], edges[-1])
        # TensorBoard reads each bucket by its right edge: keep the buckets from the first to
        # the last non-empty one, and one empty bucket before them for the leftmost edge
        filled = np.flatnonzero(counts)
        first, last = filled[0], filled[-1]
        counts = np.concatenate([[0], counts[first:last + 1]])
        edges = edges[first:last + 2]
        histo = self._tb["HistogramProto"](min=data.min(), max=data.max(), num=data.size,
                                           sum=data.sum(), sum_squares=data.dot(data),
                                           bucket_limit=edges.tolist(), bucket=counts.tolist())
        self._add(self._value(tag=tag, histo=histo), global_step, walltime)

    def add_text(self, tag: str, text_string: str, global_step=None, walltime=None) -> None:
        """Logs a text (markdown) for TensorBoard's text dashboard, under `<tag>/text_summary`
        as torch names it."""
        tb = self._tb
        from tensorboard.plugins.text.plugin_data_pb2 import TextPluginData
        meta = tb["SummaryMetadata"](plugin_data=tb["SummaryMetadata"].PluginData(
            plugin_name="text", content=TextPluginData(version=0).SerializeToString()))
        tensor = tb["TensorProto"](dtype="DT_STRING", string_val=[text_string.encode("utf-8")],
                                   tensor_shape=tb["TensorShapeProto"](
                                       dim=[tb["TensorShapeProto"].Dim(size=1)]))
        self._add(self._value(tag=f"{tag}/text_summary", tensor=tensor, metadata=meta), global_step,
                  walltime)

    def add_image(self, tag: str, img_tensor, global_step=None, walltime=None,
                  dataformats: str = "CHW") -> None:
        """Logs an image: uint8 values in [0, 255], or floats in [0, 1] (scaled by 255 and
        clipped), laid out as `dataformats` (CHW, HWC or HW) with 1 (grey), 3 (RGB) or 4
        (RGBA) channels; PNG-encoded with Pillow."""
        image = _hwc(_numpy(img_tensor), dataformats)
        if image.shape[2] not in (1, 3, 4):
            raise ValueError(f"add_image takes 1 (grey), 3 (RGB) or 4 (RGBA) channels, got "
                             f"{image.shape[2]}")
        if image.dtype != np.uint8:
            image = np.clip(image.astype(np.float32) * 255, 0, 255).astype(np.uint8)
        self._add(self._value(tag=tag, image=self._png(image)), global_step, walltime)

    def add_figure(self, tag: str, figure, global_step=None, close: bool = True,
                   walltime=None) -> None:
        """Logs a matplotlib figure as an image (and closes it unless `close=False`)."""
        figure.canvas.draw()
        image = np.asarray(figure.canvas.buffer_rgba())
        if close:
            import matplotlib.pyplot as plt
            plt.close(figure)
        self.add_image(tag, image, global_step, walltime, dataformats="HWC")

    def _png(self, image: np.ndarray):
        try:
            from PIL import Image
        except ImportError as e:
            raise ImportError("add_image encodes PNG with Pillow: pip install pillow") from e
        out = io.BytesIO()
        Image.fromarray(image).save(out, format="PNG")
        height, width, channels = image.shape
        return self._tb["Summary"].Image(height=height, width=width, colorspace=channels,
                                         encoded_image_string=out.getvalue())

    def flush(self) -> None:
        """Writes the queued events to disk."""
        for writer in [self._writer, *(g._writer for g in self._groups.values())]:
            if writer is not None:
                writer.flush()

    def close(self) -> None:
        """Flushes and closes the event files; a later add_* opens a new one."""
        for writer in [self._writer, *(g._writer for g in self._groups.values())]:
            if writer is not None:
                writer.flush()
                writer.close()
        self._writer = None
        for group in self._groups.values():
            group._writer = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getattr__(self, name):
        if name in _LEFT_OUT:
            raise AttributeError(f"SummaryWriter.{name} is torch's but not aneforge's: aneforge "
                                 f"writes scalars, histograms, text, images and figures "
                                 f"(add_scalar, add_scalars, add_histogram, add_text, add_image, "
                                 f"add_figure)")
        raise AttributeError(f"'SummaryWriter' object has no attribute {name!r}")


__all__ = ["SummaryWriter"]

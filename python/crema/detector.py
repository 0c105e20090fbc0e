"""crema.Detector, with the API of pycaffe's caffe.Detector: a Net that classifies rectangular
windows of images, R-CNN style. Each window, optionally enlarged to take in some surrounding
context, is warped to the net's input size and preprocessed like a Classifier's image."""
import numpy as np

from . import io
from ._crema import TEST
from .classifier import image_transformer
from .pycrema import Net


def _as_image(source):
    """An image path is loaded with io.load_image; an array is used as it is (HxWxK)."""
    if isinstance(source, (str, bytes)) or hasattr(source, '__fspath__'):
        return io.load_image(source)
    image = np.asarray(source, dtype=np.float32)
    return image[:, :, None] if image.ndim == 2 else image


def _window_corners(window):
    """(ymin, xmin, ymax, xmax) as a 2x2 float array [[ymin, xmin], [ymax, xmax]]."""
    corners = np.asarray(window, dtype=np.float64).reshape(-1)
    if corners.size != 4 or not np.all(np.isfinite(corners)):
        raise ValueError('a window is (ymin, xmin, ymax, xmax), got %r' % (window,))
    corners = corners.reshape(2, 2)
    if np.any(corners[1] <= corners[0]):
        raise ValueError('window %r is empty (it needs ymin < ymax and xmin < xmax)'
                         % (window,))
    return corners


class Detector(Net):
    """Detector(model_file, pretrained_file, mean=None, input_scale=None, raw_scale=None,
    channel_swap=None, context_pad=None).

    The preprocessing options are io.Transformer's (self.transformer); context_pad is the
    number of input pixels of context around each warped window (see crop)."""

    def __init__(self, model_file, pretrained_file, mean=None, input_scale=None, raw_scale=None,
                 channel_swap=None, context_pad=None):
        Net.__init__(self, model_file, pretrained_file, TEST)
        self.transformer = image_transformer(self, mean, input_scale, raw_scale, channel_swap)
        self.configure_crop(context_pad)

    def detect_windows(self, images_windows):
        """Runs the net on windows of images. images_windows is a list of (image, windows)
        where image is a file name (read with io.load_image) or an HxWxK array, and windows
        a list of (ymin, xmin, ymax, xmax). Returns one dict per window, in input order:
        {'window': the window, 'prediction': the net's first output for it, 'filename': the
        file name, or None for an array}."""
        crops, origins = [], []
        for source, windows in images_windows:
            image = _as_image(source)
            label = source if isinstance(source, (str, bytes)) or \
                hasattr(source, '__fspath__') else None
            for window in windows:
                crops.append(self.crop(image, window))
                origins.append((label, window))
        if not crops:
            return []
        name = self.inputs[0]
        batch = np.stack([self.transformer.preprocess(name, crop) for crop in crops])
        scores = self.forward_all(**{name: batch})[self.outputs[0]]
        return [{'window': window, 'prediction': score, 'filename': label}
                for (label, window), score in zip(origins, scores)]

    def crop(self, im, window):
        """The HxWxK image content that represents `window` = (ymin, xmin, ymax, xmax).

        Without context_pad: im[ymin:ymax, xmin:xmax] (preprocess then resizes it).

        With context_pad = p and an input of size S (per axis), as R-CNN: the window, whose
        extent is measured inclusively (ymax - ymin + 1), is enlarged about its centre by
        S / (S - 2p) and rounded, so that once the enlarged box is warped to S its original
        part spans S - 2p pixels with p pixels of context on each side. The enlarged box is
        clipped to the image, those image pixels (end-exclusive, as pycaffe) are resized by the
        same warp factor and placed where they fall in an S-sized canvas; the rest of the
        canvas, which lies outside the image, holds the image-space mean (zero after mean
        subtraction). Returns the S-sized canvas."""
        image = np.asarray(im, dtype=np.float32)
        corners = _window_corners(window)
        if not self.context_pad:
            top, left = np.maximum(corners[0], 0).astype(int)
            bottom, right = corners[1].astype(int)
            region = image[top:bottom, left:right]
            if region.size == 0:
                raise ValueError('window %r lies outside the %dx%d image'
                                 % (window, image.shape[0], image.shape[1]))
            return region
        return self._context_crop(image, corners)

    def _context_crop(self, image, corners):
        size = self.crop_dims.astype(np.float64)  # (height, width) of the net input
        extent = corners[1] - corners[0] + 1
        centre = corners[0] + extent / 2
        growth = size / (size - 2.0 * self.context_pad)
        half = extent / 2 * growth
        box = np.round(np.stack([centre - half, centre + half]))  # [[y0, x0], [y1, x1]]
        warp = size / (box[1] - box[0] + 1)  # canvas pixels per image pixel
        # Canvas rows/columns before the image starts (the box may begin above/left of it).
        lead = np.round(np.maximum(0.0, -box[0]) * warp)
        inside = np.clip(box, 0.0, np.asarray(image.shape[:2], dtype=np.float64))
        span = np.round((inside[1] - inside[0] + 1) * warp)
        span = np.minimum(span, size - lead).astype(int)
        lead = lead.astype(int)
        canvas = np.empty(tuple(self.crop_dims) + (self.crop_mean.shape[-1],), dtype=np.float32)
        canvas[...] = self.crop_mean
        (y0, x0), (y1, x1) = inside.astype(int)
        pixels = image[y0:y1, x0:x1]
        if pixels.size and np.all(span > 0):
            canvas[lead[0]:lead[0] + span[0], lead[1]:lead[1] + span[1]] = \
                io.resize_image(pixels, span)
        return canvas

    def configure_crop(self, context_pad):
        """Sets context_pad (input pixels of context around each window, None or 0 for none)
        and the image-space mean that fills the part of a padded window outside the image."""
        name = self.inputs[0]
        input_shape = self.blobs[name].data.shape
        self.context_pad = context_pad
        self.crop_dims = np.array(input_shape[2:])
        self.crop_dims_full = np.array(tuple(input_shape[2:]) + (input_shape[1],))
        if self.context_pad and 2 * self.context_pad >= self.crop_dims.min():
            raise ValueError('context_pad %r leaves nothing of a %dx%d input for the window'
                             % ((context_pad,) + tuple(self.crop_dims)))
        self.crop_mean = self._image_space_mean(name)

    def _image_space_mean(self, name):
        """The HxWxK image that preprocess maps to zero: the transformer's mean with raw
        scale, channel swap and transpose undone, which is what deprocess makes of zeros."""
        zeros = np.zeros(self.blobs[name].data.shape[1:], dtype=np.float32)
        mean = self.transformer.deprocess(name, zeros)
        return np.broadcast_to(mean, self.crop_dims_full).astype(np.float32)

"""Image input for nets, as pycaffe's caffe.io: the Transformer (HxWxC float image in [0, 1] ->
the net's CxHxW input: transpose, channel swap, raw scale, mean, input scale), load_image,
resize_image, oversample, and blobproto/array conversions."""
import numpy as np

from . import _crema


def load_image(filename, color=True):
    """An HxWxC float32 image in [0, 1], RGB (C = 3), or grey (C = 1) with color=False.
    Decoded by OpenCV in crema's C++ side."""
    if not _crema.has_opencv:
        raise RuntimeError('crema was built without OpenCV, so it cannot decode images')
    return _crema._load_image(str(filename), bool(color))


def resize_image(im, new_dims, interp_order=1):
    """`im` (HxWxK) resized to new_dims (height, width): interp_order 0 nearest, 1 bilinear,
    higher bicubic. The value range is kept."""
    im = np.asarray(im, dtype=np.float32)
    squeeze = im.ndim == 2
    if squeeze:
        im = im[:, :, np.newaxis]
    if not _crema.has_opencv:
        raise RuntimeError('crema was built without OpenCV, so it cannot resize images')
    out = _crema._resize_image(np.ascontiguousarray(im), int(new_dims[0]), int(new_dims[1]),
                               int(interp_order))
    return out[:, :, 0] if squeeze else out


def oversample(images, crop_dims):
    """Ten crops of each HxWxK image: the four corners and the centre, and their mirrors.
    Returns an array of 10 * len(images) crops of crop_dims (height, width)."""
    im_shape = np.array(images[0].shape)
    crop_dims = np.array(crop_dims)
    im_center = im_shape[:2] / 2.0
    h_indices = (0, im_shape[0] - crop_dims[0])
    w_indices = (0, im_shape[1] - crop_dims[1])
    crops_ix = np.empty((5, 4), dtype=int)
    k = 0
    for i in h_indices:
        for j in w_indices:
            crops_ix[k] = (i, j, i + crop_dims[0], j + crop_dims[1])
            k += 1
    crops_ix[4] = np.tile(im_center, (1, 2)) + np.concatenate([-crop_dims / 2.0, crop_dims / 2.0])
    crops_ix = np.tile(crops_ix, (2, 1))
    crops = np.empty((10 * len(images), crop_dims[0], crop_dims[1], im_shape[-1]),
                     dtype=np.float32)
    ix = 0
    for im in images:
        for crop in crops_ix:
            crops[ix] = im[crop[0]:crop[2], crop[1]:crop[3], :]
            ix += 1
        crops[ix - 5:ix] = crops[ix - 5:ix, :, ::-1, :]  # mirrors
    return crops


class Transformer:
    """Turns images into a net's input and back. `inputs` maps input blob names to their shapes
    (e.g. {'data': net.blobs['data'].data.shape}). preprocess applies, in order: resize to the
    input's HxW, transpose, channel swap, raw scale, mean subtraction, input scale."""

    def __init__(self, inputs):
        self.inputs = dict(inputs)
        self.transpose = {}
        self.channel_swap = {}
        self.raw_scale = {}
        self.mean = {}
        self.input_scale = {}

    def _check_input(self, name):
        if name not in self.inputs:
            raise ValueError('%r is not one of the net inputs: %s' % (name, sorted(self.inputs)))

    def set_transpose(self, name, order):
        """The axis order taking the image to the input, e.g. (2, 0, 1) for HxWxC -> CxHxW."""
        self._check_input(name)
        if len(order) != len(self.inputs[name]) - 1:
            raise ValueError('transpose order needs as many axes as the input has dimensions')
        self.transpose[name] = order

    def set_channel_swap(self, name, order):
        """The channel order to take after transposing, e.g. (2, 1, 0) for RGB -> BGR."""
        self._check_input(name)
        if len(order) != self.inputs[name][1]:
            raise ValueError('channel swap needs as many indices as the input has channels')
        self.channel_swap[name] = order

    def set_raw_scale(self, name, scale):
        """Multiplies the [0, 1] image, e.g. 255 for nets trained on [0, 255] pixels."""
        self._check_input(name)
        self.raw_scale[name] = scale

    def set_mean(self, name, mean):
        """The mean to subtract: an array of the input's CxHxW shape, or one value per channel."""
        self._check_input(name)
        mean = np.asarray(mean, dtype=np.float32)
        ms = mean.shape
        if mean.ndim == 1:
            if ms[0] != self.inputs[name][1]:
                raise ValueError('the mean needs one value per input channel')
            mean = mean[:, np.newaxis, np.newaxis]
        else:
            if len(ms) == 2:
                ms = (1,) + ms
            if len(ms) != 3:
                raise ValueError('the mean must be per-channel or CxHxW')
            if ms != tuple(self.inputs[name][1:]):
                raise ValueError('the mean shape %s differs from the input shape %s'
                                 % (ms, tuple(self.inputs[name][1:])))
        self.mean[name] = mean

    def set_input_scale(self, name, scale):
        """Multiplies after the mean subtraction, e.g. 0.017 for nets trained that way."""
        self._check_input(name)
        self.input_scale[name] = scale

    def preprocess(self, name, data):
        """An HxWxK image -> a float32 input of the net's CxHxW shape."""
        self._check_input(name)
        caffe_in = np.asarray(data, dtype=np.float32)
        in_dims = self.inputs[name][2:]
        if caffe_in.shape[:2] != tuple(in_dims):
            caffe_in = resize_image(caffe_in, in_dims)
        if name in self.transpose:
            caffe_in = caffe_in.transpose(self.transpose[name])
        if name in self.channel_swap:
            caffe_in = caffe_in[list(self.channel_swap[name]), :, :]
        if name in self.raw_scale:
            caffe_in = caffe_in * self.raw_scale[name]
        if name in self.mean:
            caffe_in = caffe_in - self.mean[name]
        if name in self.input_scale:
            caffe_in = caffe_in * self.input_scale[name]
        return np.ascontiguousarray(caffe_in, dtype=np.float32)

    def deprocess(self, name, data):
        """The inverse of preprocess (without the resize): a net input -> an HxWxK image."""
        self._check_input(name)
        decaf_in = np.asarray(data, dtype=np.float32).copy().squeeze()
        if decaf_in.ndim == 2:
            decaf_in = decaf_in[np.newaxis]
        if name in self.input_scale:
            decaf_in /= self.input_scale[name]
        if name in self.mean:
            decaf_in += self.mean[name]
        if name in self.raw_scale:
            decaf_in /= self.raw_scale[name]
        if name in self.channel_swap:
            decaf_in = decaf_in[np.argsort(self.channel_swap[name]), :, :]
        if name in self.transpose:
            decaf_in = decaf_in.transpose(np.argsort(self.transpose[name]))
        return decaf_in


def blobproto_to_array(data, return_diff=False):
    """A crema.proto BlobProto (e.g. a .binaryproto mean) as a numpy array of its shape."""
    values = data.diff if return_diff else data.data
    if data.HasField('num') or data.HasField('channels') or data.HasField('height') \
            or data.HasField('width'):
        shape = (data.num, data.channels, data.height, data.width)
    else:
        shape = tuple(data.shape.dim)
    if not values and data.double_data:
        values = data.double_diff if return_diff else data.double_data
    return np.array(values, dtype=np.float32).reshape(shape)


def array_to_blobproto(arr, diff=None):
    """A numpy array (and optional diff) as a crema.proto BlobProto."""
    from .proto import crema_pb2
    blob = crema_pb2.BlobProto()
    blob.shape.dim.extend(arr.shape)
    blob.data.extend(np.asarray(arr, dtype=np.float32).flat)
    if diff is not None:
        blob.diff.extend(np.asarray(diff, dtype=np.float32).flat)
    return blob


def load_mean(path):
    """A .binaryproto mean file (compute-image-mean's output) as a CxHxW array."""
    from .proto import crema_pb2
    blob = crema_pb2.BlobProto()
    with open(path, 'rb') as f:
        blob.ParseFromString(f.read())
    arr = blobproto_to_array(blob)
    return arr[0] if arr.ndim == 4 else arr

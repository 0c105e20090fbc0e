"""Image input for nets, with the API of pycaffe's caffe.io.

Images on the Python side are HxWxK float arrays (load_image gives RGB in [0, 1]); a net input
is KxHxW. Transformer converts between the two; resize_image, oversample and the BlobProto /
Datum helpers complete the module.
"""
import numpy as np

from . import _crema


def _need_opencv(what):
    if not _crema.has_opencv:
        raise RuntimeError('crema was built without OpenCV, so it cannot %s' % what)


def load_image(filename, color=True):
    """Reads an image file as float32 HxWxK in [0, 1]: K = 3 (RGB) when `color`, else K = 1."""
    _need_opencv('decode images')
    return _crema._load_image(str(filename), bool(color))


def resize_image(im, new_dims, interp_order=1):
    """Resamples an HxWxK (or HxW) image to new_dims = (height, width) as float32.
    interp_order: 0 nearest neighbour, 1 bilinear, 2 or more bicubic. Values are not rescaled."""
    pixels = np.asarray(im, dtype=np.float32)
    if pixels.ndim not in (2, 3):
        raise ValueError('resize_image wants an HxW or HxWxK image, got shape %s'
                         % (pixels.shape,))
    height, width = (int(d) for d in new_dims[:2])
    planar = pixels.ndim == 2
    stack = pixels[:, :, None] if planar else pixels
    if stack.shape[:2] == (height, width):
        resized = stack.copy()
    else:
        _need_opencv('resize images')
        resized = _crema._resize_image(np.ascontiguousarray(stack), height, width,
                                       int(interp_order))
    return resized[:, :, 0] if planar else resized


def _centred_start(full, part):
    """First index of a length-`part` run centred in a length-`full` axis (rounded down)."""
    return (np.asarray(full) - np.asarray(part)) // 2


def oversample(images, crop_dims):
    """The ten standard crops of each HxWxK image (all images of one size): top-left,
    top-right, bottom-left, bottom-right and centre crops of crop_dims = (height, width), then
    the same five mirrored left-right. Returns float32 (10 * N) x height x width x K, the ten
    crops of image 0 first."""
    batch = np.asarray(images, dtype=np.float32)
    if batch.ndim != 4:
        raise ValueError('oversample wants a list of HxWxK images of one size')
    crop_h, crop_w = (int(d) for d in crop_dims[:2])
    img_h, img_w = batch.shape[1:3]
    if not (0 < crop_h <= img_h and 0 < crop_w <= img_w):
        raise ValueError('crop %dx%d does not fit in the %dx%d images'
                         % (crop_h, crop_w, img_h, img_w))
    bottom, right = img_h - crop_h, img_w - crop_w
    mid_y, mid_x = _centred_start((img_h, img_w), (crop_h, crop_w))
    origins = [(0, 0), (0, right), (bottom, 0), (bottom, right), (mid_y, mid_x)]
    # Axis 1 indexes the crop: the five plain ones, then their mirrors.
    plain = np.stack([batch[:, y:y + crop_h, x:x + crop_w] for y, x in origins], axis=1)
    ten = np.concatenate([plain, plain[:, :, :, ::-1]], axis=1)
    return ten.reshape((-1,) + ten.shape[2:])


class Transformer:
    """Converts HxWxK images to a net input's KxHxW layout and back.

    `inputs` maps input names to their blob shapes, e.g. {'data': net.blobs['data'].data.shape}.
    preprocess(name, image) resizes the image to the input's height and width (when they
    differ) and then applies whatever was configured, in this order: transpose, channel swap,
    raw scale (multiply), mean subtraction, input scale (multiply). deprocess undoes those in
    reverse order. The configured values are kept in the dicts transpose, channel_swap,
    raw_scale, mean and input_scale, keyed by input name."""

    def __init__(self, inputs):
        self.inputs = dict(inputs)
        self.transpose = {}
        self.channel_swap = {}
        self.raw_scale = {}
        self.mean = {}
        self.input_scale = {}

    def __check_input(self, name):
        if name not in self.inputs:
            raise ValueError('%r is not a net input; the inputs are %s'
                             % (name, sorted(self.inputs)))
        return tuple(self.inputs[name])

    def set_transpose(self, name, order):
        """The axis permutation applied to the image, e.g. (2, 0, 1) for HxWxK -> KxHxW."""
        shape = self.__check_input(name)
        if len(order) != len(shape) - 1:
            raise ValueError('the transpose order for %r needs %d axes, got %d'
                             % (name, len(shape) - 1, len(order)))
        self.transpose[name] = order

    def set_channel_swap(self, name, order):
        """The new channel order, applied after the transpose: (2, 1, 0) turns RGB into BGR."""
        shape = self.__check_input(name)
        if len(order) != shape[1]:
            raise ValueError('the channel swap for %r needs %d channels, got %d'
                             % (name, shape[1], len(order)))
        self.channel_swap[name] = order

    def set_raw_scale(self, name, scale):
        """A factor on the image before the mean, e.g. 255 to go from [0, 1] to [0, 255]."""
        self.__check_input(name)
        self.raw_scale[name] = scale

    def set_mean(self, name, mean):
        """The mean subtracted after the raw scale: K values (one per channel), or an array of
        the input's KxHxW shape (an HxW array is taken as one channel)."""
        shape = self.__check_input(name)
        values = np.asarray(mean, dtype=np.float32)
        if values.ndim == 1:
            if values.shape[0] != shape[1]:
                raise ValueError('a per-channel mean for %r needs %d values, got %d'
                                 % (name, shape[1], values.shape[0]))
            values = values.reshape(-1, 1, 1)
        else:
            if values.ndim == 2:
                values = values[None]
            if values.shape != shape[1:]:
                raise ValueError('the mean for %r has shape %s; the input is %s'
                                 % (name, values.shape, shape[1:]))
        self.mean[name] = values

    def set_input_scale(self, name, scale):
        """A factor applied last, after the mean subtraction (e.g. 0.017)."""
        self.__check_input(name)
        self.input_scale[name] = scale

    def preprocess(self, name, data):
        """One HxWxK image -> a float32 array in the layout of one item of input `name`."""
        shape = self.__check_input(name)
        x = np.asarray(data, dtype=np.float32)
        target_hw = shape[2:]
        if x.shape[:2] != target_hw:
            x = resize_image(x, target_hw)
        if name in self.transpose:
            x = np.transpose(x, self.transpose[name])
        if name in self.channel_swap:
            x = x[np.asarray(self.channel_swap[name])]
        if name in self.raw_scale:
            x = x * np.float32(self.raw_scale[name])
        if name in self.mean:
            x = x - self.mean[name]
        if name in self.input_scale:
            x = x * np.float32(self.input_scale[name])
        return np.ascontiguousarray(x, dtype=np.float32)

    def deprocess(self, name, data):
        """The inverse of preprocess (except the resize): a net input item (a leading axis of
        length 1 is dropped) -> an HxWxK image."""
        self.__check_input(name)
        x = np.array(data, dtype=np.float32).squeeze()
        if x.ndim == 2:  # a single channel squeezed away
            x = x[None]
        if name in self.input_scale:
            x = x / np.float32(self.input_scale[name])
        if name in self.mean:
            x = x + self.mean[name]
        if name in self.raw_scale:
            x = x / np.float32(self.raw_scale[name])
        if name in self.channel_swap:
            x = x[np.argsort(self.channel_swap[name])]
        if name in self.transpose:
            x = np.transpose(x, np.argsort(self.transpose[name]))
        return x


def _pb2():
    from .proto import crema_pb2
    return crema_pb2


def blobproto_to_array(blob, return_diff=False):
    """A BlobProto's data (or diff) as a float32 array: shaped num x channels x height x width
    when the blob uses those legacy fields, else by its shape.dim."""
    legacy = any(blob.HasField(f) for f in ('num', 'channels', 'height', 'width'))
    dims = (blob.num, blob.channels, blob.height, blob.width) if legacy else tuple(blob.shape.dim)
    single, double = (blob.diff, blob.double_diff) if return_diff else (blob.data, blob.double_data)
    values = single if len(single) or not len(double) else double
    return np.array(values, dtype=np.float32).reshape(dims)


def array_to_blobproto(arr, diff=None):
    """An array (and optionally its diff, same size) as a BlobProto with shape.dim set."""
    arr = np.asarray(arr)
    blob = _pb2().BlobProto()
    blob.shape.dim.extend(int(d) for d in arr.shape)
    blob.data.extend(arr.astype(np.float32).ravel().tolist())
    if diff is not None:
        blob.diff.extend(np.asarray(diff, dtype=np.float32).ravel().tolist())
    return blob


def arraylist_to_blobprotovector_str(arraylist):
    """A list of arrays as a serialized BlobProtoVector."""
    vector = _pb2().BlobProtoVector()
    vector.blobs.extend(array_to_blobproto(a) for a in arraylist)
    return vector.SerializeToString()


def blobprotovector_str_to_arraylist(data):
    """A serialized BlobProtoVector as a list of arrays."""
    vector = _pb2().BlobProtoVector()
    vector.ParseFromString(data)
    return [blobproto_to_array(b) for b in vector.blobs]


def array_to_datum(arr, label=None):
    """A KxHxW array as a Datum: uint8 arrays go to `data` as raw bytes, others to
    float_data."""
    arr = np.asarray(arr)
    if arr.ndim != 3:
        raise ValueError('array_to_datum wants a KxHxW array, got shape %s' % (arr.shape,))
    datum = _pb2().Datum()
    datum.channels, datum.height, datum.width = (int(d) for d in arr.shape)
    if arr.dtype == np.uint8:
        datum.data = arr.tobytes()
    else:
        datum.float_data.extend(arr.astype(np.float64).ravel().tolist())
    if label is not None:
        datum.label = int(label)
    return datum


def datum_to_array(datum):
    """A (non-encoded) Datum as a KxHxW array: uint8 from `data`, else float from float_data."""
    dims = (datum.channels, datum.height, datum.width)
    if len(datum.data):
        return np.frombuffer(datum.data, dtype=np.uint8).reshape(dims)
    return np.array(datum.float_data, dtype=np.float64).reshape(dims)


def load_mean(path):
    """A .binaryproto mean (compute-image-mean's output) as a KxHxW array."""
    blob = _pb2().BlobProto()
    with open(path, 'rb') as f:
        blob.ParseFromString(f.read())
    mean = blobproto_to_array(blob)
    return mean[0] if mean.ndim == 4 else mean

"""crema.Classifier, with the API of pycaffe's caffe.Classifier: a Net that classifies whole
images, resized to image_dims and then either cropped in the centre or oversampled (ten crops
whose predictions are averaged)."""
import numpy as np

from . import io
from ._crema import TEST
from .pycrema import Net


def image_transformer(net, mean=None, input_scale=None, raw_scale=None, channel_swap=None):
    """An io.Transformer taking HxWxK images to the net's first input (KxHxW), with the options
    that are not None."""
    name = net.inputs[0]
    transformer = io.Transformer({name: net.blobs[name].data.shape})
    transformer.set_transpose(name, (2, 0, 1))
    options = ((transformer.set_mean, mean), (transformer.set_input_scale, input_scale),
               (transformer.set_raw_scale, raw_scale),
               (transformer.set_channel_swap, channel_swap))
    for setter, value in options:
        if value is not None:
            setter(name, value)
    return transformer


def centre_crop(images, crop_dims):
    """The centred crop_dims = (height, width) window of an N x H x W x K batch."""
    images = np.asarray(images)
    size = np.asarray(crop_dims[:2], dtype=int)
    if np.any(size <= 0) or np.any(size > images.shape[1:3]):
        raise ValueError('crop %s does not fit in images of %s' % (tuple(size),
                                                                    images.shape[1:3]))
    top, left = (np.asarray(images.shape[1:3]) - size) // 2
    return images[:, top:top + size[0], left:left + size[1]]


class Classifier(Net):
    """Classifier(model_file, pretrained_file, image_dims=None, mean=None, input_scale=None,
    raw_scale=None, channel_swap=None).

    The net runs in the TEST phase; its first input gives crop_dims (height, width), and
    image_dims (default crop_dims) is the size images are resized to before cropping. The
    preprocessing options are those of io.Transformer, kept in self.transformer."""

    def __init__(self, model_file, pretrained_file, image_dims=None, mean=None, input_scale=None,
                 raw_scale=None, channel_swap=None):
        Net.__init__(self, model_file, pretrained_file, TEST)
        self.transformer = image_transformer(self, mean, input_scale, raw_scale, channel_swap)
        self.crop_dims = np.array(self.blobs[self.inputs[0]].data.shape[2:])
        self.image_dims = self.crop_dims if image_dims is None else np.array(image_dims)

    def predict(self, inputs, oversample=True):
        """The first output for a list of HxWxK images: N x classes. Each image is resized to
        image_dims; with `oversample` the ten crops of io.oversample go through the net and
        their outputs are averaged per image, otherwise the centre crop is used."""
        if len(inputs) == 0:
            raise ValueError('predict needs at least one image')
        resized = np.stack([io.resize_image(image, self.image_dims) for image in inputs])
        crops = (io.oversample(resized, self.crop_dims) if oversample
                 else centre_crop(resized, self.crop_dims))
        name = self.inputs[0]
        batch = np.stack([self.transformer.preprocess(name, crop) for crop in crops])
        scores = self.forward_all(**{name: batch})[self.outputs[0]]
        if oversample:
            scores = scores.reshape((len(resized), 10, -1)).mean(axis=1)
        return scores

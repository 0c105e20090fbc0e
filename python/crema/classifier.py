"""crema.Classifier: a Net for image classification (pycaffe's caffe.Classifier): resize,
optional ten-crop oversampling, preprocessing and averaged predictions."""
import numpy as np

from . import io
from ._crema import TEST
from .pycrema import Net


def input_transformer(net, mean, input_scale, raw_scale, channel_swap):
    """An io.Transformer for the net's first input (HxWxC images), with the given options."""
    in_ = net.inputs[0]
    transformer = io.Transformer({in_: net.blobs[in_].data.shape})
    transformer.set_transpose(in_, (2, 0, 1))
    if mean is not None:
        transformer.set_mean(in_, mean)
    if input_scale is not None:
        transformer.set_input_scale(in_, input_scale)
    if raw_scale is not None:
        transformer.set_raw_scale(in_, raw_scale)
    if channel_swap is not None:
        transformer.set_channel_swap(in_, channel_swap)
    return transformer


class Classifier(Net):
    """Classifier(model_file, pretrained_file, image_dims=None, mean=None, input_scale=None,
    raw_scale=None, channel_swap=None): the preprocessing options are those of io.Transformer
    for the net's first input."""

    def __init__(self, model_file, pretrained_file, image_dims=None, mean=None, input_scale=None,
                 raw_scale=None, channel_swap=None):
        Net.__init__(self, model_file, pretrained_file, TEST)
        in_ = self.inputs[0]
        self.transformer = input_transformer(self, mean, input_scale, raw_scale, channel_swap)
        self.crop_dims = np.array(self.blobs[in_].data.shape[2:])
        self.image_dims = self.crop_dims if image_dims is None else np.array(image_dims)

    def predict(self, inputs, oversample=True):
        """Class probabilities (N x classes) for a list of HxWxK images: each image resized to
        image_dims, then ten crops averaged (oversample) or the centre crop."""
        input_ = np.zeros((len(inputs), self.image_dims[0], self.image_dims[1],
                           inputs[0].shape[2]), dtype=np.float32)
        for ix, in_ in enumerate(inputs):
            input_[ix] = io.resize_image(in_, self.image_dims)
        if oversample:
            input_ = io.oversample(input_, self.crop_dims)
        else:
            center = np.array(self.image_dims) / 2.0
            crop = np.tile(center, (1, 2))[0] + np.concatenate([-self.crop_dims / 2.0,
                                                                self.crop_dims / 2.0])
            crop = crop.astype(int)
            input_ = input_[:, crop[0]:crop[2], crop[1]:crop[3], :]
        in_ = self.inputs[0]
        caffe_in = np.zeros(np.array(input_.shape)[[0, 3, 1, 2]], dtype=np.float32)
        for ix, in_img in enumerate(input_):
            caffe_in[ix] = self.transformer.preprocess(in_, in_img)
        out = self.forward_all(**{in_: caffe_in})
        predictions = out[self.outputs[0]]
        if oversample:
            predictions = predictions.reshape((len(predictions) // 10, 10, -1)).mean(1)
        return predictions

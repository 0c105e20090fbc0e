"""Base class of Python layers (``type: "Python"`` with ``python_param { module layer }``)."""


class Layer:
    """Subclass this and define setup, reshape, forward and backward, as for pycaffe's
    caffe.Layer. Before setup crema sets ``self.param_str`` (python_param.param_str),
    ``self.phase`` (crema.TRAIN or crema.TEST) and ``self.blobs`` (the layer's learnable blobs;
    ``self.blobs.add_blob(*shape)`` in setup adds one). ``bottom``/``top`` are lists of
    crema.Blob valid during the call."""

    def __init__(self, layer_param=None):
        self.layer_param = layer_param

    def setup(self, bottom, top):
        pass

    def reshape(self, bottom, top):
        pass

    def forward(self, bottom, top):
        pass

    def backward(self, top, propagate_down, bottom):
        pass

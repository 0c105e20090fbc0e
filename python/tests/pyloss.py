"""A Euclidean loss written in Python (pycaffe's examples/pycaffe/layers/pyloss.py), for tests."""
import numpy as np

import crema


class EuclideanLossLayer(crema.Layer):
    """loss = sum((bottom0 - bottom1)^2) / num / 2."""

    def setup(self, bottom, top):
        if len(bottom) != 2:
            raise ValueError('needs two bottoms')
        self.scale = float(self.param_str) if self.param_str else 1.0

    def reshape(self, bottom, top):
        if bottom[0].count != bottom[1].count:
            raise ValueError('bottoms must have the same count')
        self.diff = np.zeros_like(bottom[0].data, dtype=np.float32)
        top[0].reshape(1)

    def forward(self, bottom, top):
        self.diff[...] = bottom[0].data - bottom[1].data
        top[0].data[...] = self.scale * np.sum(self.diff ** 2) / bottom[0].num / 2.

    def backward(self, top, propagate_down, bottom):
        for i in range(2):
            if not propagate_down[i]:
                continue
            sign = 1 if i == 0 else -1
            bottom[i].diff[...] = self.scale * sign * self.diff / bottom[i].num


class TimesTwoLayer(crema.Layer):
    """top = 2 * bottom, with one learnable blob holding the factor (to test self.blobs)."""

    def setup(self, bottom, top):
        self.blobs.add_blob(1)
        self.blobs[0].data[...] = 2.0

    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].shape)

    def forward(self, bottom, top):
        top[0].data[...] = self.blobs[0].data[0] * bottom[0].data

    def backward(self, top, propagate_down, bottom):
        bottom[0].diff[...] = self.blobs[0].data[0] * top[0].diff

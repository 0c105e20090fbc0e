"""pycaffe's Python-side sugar on the C++ Net and Solver: OrderedDicts of blobs and params,
forward/backward with keyword inputs, and the Net constructor's several call forms."""
from collections import OrderedDict

import numpy as np

from . import _crema
from ._crema import Net, Solver, TEST

_net_init = Net.__init__


def _net_construct(self, model, *args, weights=None, phase=None, level=0, stages=(),
                   memory_plan='off', keep_blobs=()):
    """Net(model, weights=None, phase=crema.TEST), also pycaffe's Net(model, phase),
    Net(model, weights, phase) and Net(model, phase, weights=...). `model` is a prototxt path,
    a crema.proto NetParameter or a NetSpec. memory_plan='inference' or 'training' shares the
    memory of intermediate blobs (only the outputs and `keep_blobs` keep their values)."""
    for arg in args:
        if isinstance(arg, (str, bytes)) and not isinstance(arg, bool) and weights is None:
            weights = arg
        elif isinstance(arg, int) and phase is None:
            phase = arg
        else:
            raise TypeError('Net(model, weights=None, phase=crema.TEST): unexpected argument %r'
                            % (arg,))
    if phase is None:
        phase = TEST
    if hasattr(model, 'to_proto'):
        model = model.to_proto()
    if hasattr(model, 'SerializeToString'):
        model = model.SerializeToString()
    if isinstance(model, bytes):
        _net_init(self, model, phase, weights, level, list(stages), memory_plan, list(keep_blobs))
    else:
        _net_init(self, str(model), phase, weights, level, list(stages), memory_plan,
                  list(keep_blobs))


def _blobs(self):
    """OrderedDict blob name -> Blob, in the net's order."""
    if not hasattr(self, '_blobs_cache'):
        self._blobs_cache = OrderedDict(zip(self._blob_names, self._blobs_list))
    return self._blobs_cache


def _params(self):
    """OrderedDict layer name -> list of its learnable Blobs (layers that have some)."""
    if not hasattr(self, '_params_cache'):
        self._params_cache = OrderedDict(
            (name, layer.blobs) for name, layer in zip(self._layer_names, self.layers)
            if len(layer.blobs) > 0)
    return self._params_cache


def _layer_dict(self):
    return OrderedDict(zip(self._layer_names, self.layers))


def _blob_loss_weights(self):
    return OrderedDict(zip(self._blob_names, self._blob_loss_weights()))


def _inputs(self):
    return [self._blob_names[i] for i in self._inputs]


def _outputs(self):
    return [self._blob_names[i] for i in self._outputs]


def _top_names(self):
    return OrderedDict((name, [self._blob_names[b] for b in self._top_ids(i)])
                       for i, name in enumerate(self._layer_names))


def _bottom_names(self):
    return OrderedDict((name, [self._blob_names[b] for b in self._bottom_ids(i)])
                       for i, name in enumerate(self._layer_names))


def _layer_index(self, name, what):
    if name not in self._layer_names:
        raise KeyError('%s: no layer named %r in net %r' % (what, name, self.name))
    return list(self._layer_names).index(name)


def _set_blobs(self, arrays, diff):
    for name, value in arrays.items():
        if name not in self.blobs:
            raise KeyError('no blob named %r in net %r' % (name, self.name))
        blob = self.blobs[name]
        value = np.asarray(value)
        if value.shape != blob.shape:
            raise ValueError('blob %r has shape %s, the array %s (reshape the blob and call '
                             'net.reshape() first)' % (name, blob.shape, value.shape))
        if diff:
            blob.diff[...] = value
        else:
            blob.data[...] = value


def _forward(self, blobs=None, start=None, end=None, **kwargs):
    """Copies keyword arrays into the input blobs, runs forward from layer `start` to `end`
    (names, inclusive) and returns {name: array} of the outputs (of `end`'s tops when given)
    plus any `blobs` asked for. The arrays are views of the net's blobs, as pycaffe."""
    _set_blobs(self, kwargs, diff=False)
    start_ind = 0 if start is None else _layer_index(self, start, 'forward start')
    if end is None:
        end_ind = len(self.layers) - 1
        outputs = set(self.outputs + list(blobs or []))
    else:
        end_ind = _layer_index(self, end, 'forward end')
        outputs = set(self.top_names[end] + list(blobs or []))
    self._forward(start_ind, end_ind)
    return {name: self.blobs[name].data for name in outputs}


def _backward(self, diffs=None, start=None, end=None, **kwargs):
    """Copies keyword arrays into the output blobs' diffs, runs backward from `start` down to
    `end` and returns {name: diff} of the inputs plus any `diffs` asked for."""
    _set_blobs(self, kwargs, diff=True)
    start_ind = len(self.layers) - 1 if start is None else _layer_index(self, start,
                                                                         'backward start')
    if end is None:
        end_ind = 0
        outputs = set(self.inputs + list(diffs or []))
    else:
        end_ind = _layer_index(self, end, 'backward end')
        outputs = set(self.bottom_names[end] + list(diffs or []))
    self._backward(start_ind, end_ind)
    return {name: self.blobs[name].diff for name in outputs}


def _batch(self, arrays):
    num = self.blobs[next(iter(arrays))].shape[0] if arrays else 0
    total = len(next(iter(arrays.values()))) if arrays else 0
    for i in range(0, total, num):
        batch = {}
        for name, value in arrays.items():
            chunk = np.asarray(value[i:i + num])
            if len(chunk) < num:  # pad the last batch
                pad = np.zeros((num - len(chunk),) + chunk.shape[1:], dtype=chunk.dtype)
                chunk = np.concatenate([chunk, pad])
            batch[name] = chunk
        yield batch, min(num, total - i)


def _forward_all(self, blobs=None, **kwargs):
    """Runs forward over inputs longer than the batch, batch by batch; returns the outputs
    (and `blobs`) concatenated, with the padding of the last batch removed."""
    all_outs = {name: [] for name in set(self.outputs + list(blobs or []))}
    for batch, valid in _batch(self, kwargs):
        outs = self.forward(blobs=blobs, **batch)
        for name in all_outs:
            all_outs[name].append(outs[name][:valid].copy())
    return {name: np.concatenate(parts) if parts else np.empty(0)
            for name, parts in all_outs.items()}


Net.__init__ = _net_construct
Net.blobs = property(_blobs)
Net.params = property(_params)
Net.layer_dict = property(_layer_dict)
Net.blob_loss_weights = property(_blob_loss_weights)
Net.layer_types = property(lambda self: [layer.type for layer in self.layers])
Net.inputs = property(_inputs)
Net.outputs = property(_outputs)
Net.top_names = property(_top_names)
Net.bottom_names = property(_bottom_names)
Net.forward = _forward
Net.backward = _backward
Net.forward_all = _forward_all


def get_solver(solver_file):
    """The solver that `solver_file` (a solver prototxt) names by its `type` (SGD default)."""
    return Solver(str(solver_file))


def _solver_of_type(type_name):
    def make(solver_file):
        return Solver(str(solver_file), type_name)
    make.__name__ = type_name + 'Solver'
    make.__doc__ = 'A %s solver from `solver_file`, whatever its `type` field says.' % type_name
    return make


SGDSolver = _solver_of_type('SGD')
NesterovSolver = _solver_of_type('Nesterov')
AdaGradSolver = _solver_of_type('AdaGrad')
RMSPropSolver = _solver_of_type('RMSProp')
AdaDeltaSolver = _solver_of_type('AdaDelta')
AdamSolver = _solver_of_type('Adam')

__all__ = ['get_solver', 'SGDSolver', 'NesterovSolver', 'AdaGradSolver', 'RMSPropSolver',
           'AdaDeltaSolver', 'AdamSolver', '_crema']

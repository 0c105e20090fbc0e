"""crema: Caffe-compatible deep learning in C++, from Python (pycaffe's API).

    import crema
    net = crema.Net('deploy.prototxt', 'weights.caffemodel', crema.TEST)
    net.blobs['data'].data[...] = image      # a numpy view of the blob's memory, no copy
    out = net.forward()

Blob ``.data``/``.diff`` return a fresh numpy view on each access; take it again after a reshape
(an older view keeps the old memory alive but no longer aliases the blob).

crema logs warnings and errors only (to stderr); ``crema.set_log_level('INFO')`` (or
GLOG_minloglevel=0 in the environment) shows every net's set-up as the crema CLI does.
"""
from ._crema import (TRAIN, TEST, Blob, ConfigError, Net, Solver, set_mode_cpu, set_mode_gpu,
                     set_device, set_random_seed, layer_types, solver_types, device,
                     set_log_level, get_log_level, __version__)
from .layer import Layer
from .pycrema import get_solver, SGDSolver, NesterovSolver, AdaGradSolver, RMSPropSolver, \
    AdaDeltaSolver, AdamSolver
from .classifier import Classifier
from .detector import Detector
from .net_spec import NetSpec, layers, params, to_proto
from . import io

__all__ = ['TRAIN', 'TEST', 'Blob', 'ConfigError', 'Net', 'Solver', 'Layer', 'get_solver',
           'SGDSolver', 'NesterovSolver', 'AdaGradSolver', 'RMSPropSolver', 'AdaDeltaSolver',
           'AdamSolver', 'set_mode_cpu', 'set_mode_gpu', 'set_device', 'set_random_seed',
           'layer_types', 'solver_types', 'device', 'set_log_level', 'get_log_level',
           'Classifier', 'Detector', 'NetSpec', 'layers', 'params', 'to_proto', 'io']

"""Nets as pictures (pycaffe's caffe.draw): the DOT graph comes from crema's C++ side (the same
as `crema draw`), Graphviz's `dot` lays it out."""
import os
import shutil
import subprocess

from . import _crema


def _serialized(net_param):
    if hasattr(net_param, 'to_proto'):  # a NetSpec
        net_param = net_param.to_proto()
    if hasattr(net_param, 'SerializeToString'):
        return net_param.SerializeToString()
    if isinstance(net_param, bytes):
        return net_param
    if isinstance(net_param, str) and os.path.exists(net_param):
        return _crema._read_net_file(net_param)
    if isinstance(net_param, str):
        return _crema._parse_net_text(net_param)
    raise TypeError('draw: expected a NetParameter, a NetSpec, prototxt text or a path')


def net_to_dot(net_param, rankdir='LR', phase=None):
    """The DOT text of a net (NetParameter, NetSpec, prototxt path or text). With `phase`
    (crema.TRAIN/TEST) only the layers of that phase are drawn."""
    return _crema._net_to_dot(_serialized(net_param), rankdir, -1 if phase is None else phase)


def draw_net(net_param, rankdir='LR', ext='png', phase=None):
    """The picture as bytes in format `ext` (png, svg, pdf, ...)."""
    dot = shutil.which('dot')
    if dot is None:
        raise RuntimeError("Graphviz's `dot` was not found on PATH (Debian: apt-get install "
                           'graphviz)')
    result = subprocess.run([dot, '-T' + ext], input=net_to_dot(net_param, rankdir, phase)
                            .encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    if result.returncode != 0:
        raise RuntimeError('dot failed: ' + result.stderr.decode(errors='replace'))
    return result.stdout


def draw_net_to_file(net_param, filename, rankdir='LR', phase=None):
    """Writes the picture to `filename`, its format from the extension (.png, .svg, .pdf;
    .dot writes the DOT text)."""
    ext = os.path.splitext(filename)[1][1:] or 'png'
    if ext == 'dot':
        data = net_to_dot(net_param, rankdir, phase).encode()
    else:
        data = draw_net(net_param, rankdir, ext, phase)
    with open(filename, 'wb') as f:
        f.write(data)


def get_pydot_graph(net_param, rankdir='LR', phase=None):
    """The graph as a pydot.Dot (needs python3-pydot)."""
    import pydot
    return pydot.graph_from_dot_data(net_to_dot(net_param, rankdir, phase))[0]

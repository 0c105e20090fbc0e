"""Net, Blob and Solver bindings: zero-copy views, forward/backward, save/load."""
import os

import numpy as np
import pytest

import crema

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LENET = os.path.join(ROOT, 'models', 'lenet', 'lenet.prototxt')

SMALL_NET = """
name: "small"
force_backward: true
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 1 }
                              bias_filler { type: "constant" value: 0.5 } } }
layer { name: "relu" type: "ReLU" bottom: "ip" top: "ip" }
"""


@pytest.fixture
def small_net(tmp_path):
    path = tmp_path / 'small.prototxt'
    path.write_text(SMALL_NET)
    return crema.Net(str(path), crema.TEST)


def test_data_is_a_view_of_the_blob_memory(small_net):
    blob = small_net.blobs['data']
    view = blob.data
    assert view.dtype == np.float32
    assert view.ctypes.data == blob._data_ptr()
    assert blob.diff.ctypes.data == blob._diff_ptr()
    assert not view.flags['OWNDATA']
    # Writing through the view is what forward sees: no copy in between.
    x = np.array([[1., -2., 3.], [0.5, 0., -1.]], dtype=np.float32)
    view[...] = x
    out = small_net.forward()['ip']
    w, b = (p.data for p in small_net.params['ip'])
    expected = np.maximum(x.astype(np.float64) @ w.T.astype(np.float64) + b, 0)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    # And the output array is the C++ blob's memory too.
    assert out.ctypes.data == small_net.blobs['ip']._data_ptr()


def test_reshape_gives_fresh_views_and_old_ones_stay_valid(small_net):
    blob = small_net.blobs['data']
    old = blob.data
    old[...] = 7
    blob.reshape(10, 3)
    small_net.reshape()
    assert blob.shape == (10, 3) and blob.count == 30
    assert blob.data.shape == (10, 3)
    assert blob.data.ctypes.data == blob._data_ptr()
    assert np.all(old == 7)  # the old buffer is still alive (kept by the view)
    assert small_net.blobs['ip'].shape == (10, 2)


def test_forward_inputs_outputs_and_backward(small_net):
    assert small_net.inputs == ['data']
    assert small_net.outputs == ['ip']
    assert small_net.layer_types == ['Input', 'InnerProduct', 'ReLU']
    assert [layer.type for layer in small_net.layers] == small_net.layer_types
    assert small_net.top_names['relu'] == ['ip']
    assert small_net.bottom_names['ip'] == ['data']
    x = np.ones((2, 3), dtype=np.float32)
    out = small_net.forward(data=x)
    np.testing.assert_allclose(small_net.blobs['data'].data, x)
    with pytest.raises(ValueError):
        small_net.forward(data=np.ones((3, 3), dtype=np.float32))
    out = small_net.forward(data=x, end='ip', blobs=['data'])
    assert set(out) == {'ip', 'data'}
    w = small_net.params['ip'][0].data.astype(np.float64)
    top_diff = np.array([[1., 2.], [3., 4.]], dtype=np.float32)
    mask = small_net.blobs['ip'].data > 0
    diffs = small_net.backward(ip=top_diff)
    np.testing.assert_allclose(diffs['data'], (top_diff * mask) @ w, rtol=1e-5, atol=1e-6)


def test_clear_param_diffs_zeroes_the_views_held(small_net):
    # A numpy view of a gradient taken before sees the zeros at once (Caffe's clear_param_diffs).
    # Positive weights: the ReLU passes the gradient (random ones masked it out in some runs).
    small_net.params['ip'][0].data[...] = np.arange(1, 7, dtype=np.float32).reshape(2, 3) / 10
    x = np.ones((2, 3), dtype=np.float32)
    small_net.forward(data=x)
    small_net.backward(ip=np.ones((2, 2), dtype=np.float32))
    diff = small_net.params['ip'][0].diff
    assert np.any(diff != 0)
    small_net.clear_param_diffs()
    assert np.all(diff == 0)
    # The next backward accumulates into those zeros.
    small_net.backward(ip=np.ones((2, 2), dtype=np.float32))
    first = diff.copy()
    small_net.backward(ip=np.ones((2, 2), dtype=np.float32))
    np.testing.assert_allclose(diff, 2 * first, rtol=1e-6)


def test_save_and_copy_from(small_net, tmp_path):
    model = tmp_path / 'small.caffemodel'
    small_net.params['ip'][0].data[...] = np.arange(6).reshape(2, 3)
    small_net.save(str(model))
    other = crema.Net(str(tmp_path / 'small.prototxt'), str(model), crema.TEST)
    np.testing.assert_array_equal(other.params['ip'][0].data, np.arange(6).reshape(2, 3))
    third = crema.Net(str(tmp_path / 'small.prototxt'), crema.TEST, weights=str(model))
    np.testing.assert_array_equal(third.params['ip'][1].data, [0.5, 0.5])
    fourth = crema.Net(str(tmp_path / 'small.prototxt'))
    fourth.copy_from(str(model))
    np.testing.assert_array_equal(fourth.params['ip'][0].data, np.arange(6).reshape(2, 3))


def test_blobs_outlive_the_net(tmp_path):
    path = tmp_path / 'small.prototxt'
    path.write_text(SMALL_NET)
    net = crema.Net(str(path), crema.TEST)
    weights = net.params['ip'][0]
    data = weights.data.copy()
    del net
    np.testing.assert_array_equal(weights.data, data)


def test_errors_become_python_exceptions(tmp_path):
    bad = tmp_path / 'bad.prototxt'
    bad.write_text('layer { name: "x" type: "Input" top: "x" nmae: "y" }')
    with pytest.raises(crema.ConfigError, match='nmae'):
        crema.Net(str(bad), crema.TEST)
    with pytest.raises(RuntimeError):
        crema.Net(str(tmp_path / 'missing.prototxt'), crema.TEST)
    with pytest.raises(ValueError):
        crema.Net(LENET, 5)


def test_modes():
    crema.set_mode_cpu()
    assert crema.device() == 'cpu'
    crema.set_device(0)
    crema.set_random_seed(3)


def test_solver_steps_and_snapshots(tmp_path):
    net = tmp_path / 'net.prototxt'
    net.write_text("""
layer { name: "data" type: "DummyData" top: "data" top: "target"
        dummy_data_param { shape { dim: 4 dim: 3 } shape { dim: 4 dim: 2 }
                           data_filler { type: "gaussian" } data_filler { type: "gaussian" } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "target" top: "loss" }
""")
    solver_file = tmp_path / 'solver.prototxt'
    solver_file.write_text('net: "%s" base_lr: 0.1 lr_policy: "fixed" max_iter: 6 display: 0 '
                           'random_seed: 1 snapshot_prefix: "%s/snap"' % (net, tmp_path))
    solver = crema.get_solver(str(solver_file))
    assert solver.type == 'SGD' and solver.iter == 0
    solver.step(2)
    assert solver.iter == 2
    w2 = solver.net.params['ip'][0].data.copy()
    model = solver.snapshot()
    assert os.path.exists(model)
    solver.step(2)
    solver.restore(str(tmp_path / 'snap_iter_2.solverstate'))
    assert solver.iter == 2
    np.testing.assert_array_equal(solver.net.params['ip'][0].data, w2)
    solver.solve()
    assert solver.iter == 6
    assert crema.AdamSolver(str(solver_file)).type == 'Adam'
    assert crema.SGDSolver(str(solver_file)).test_nets == []

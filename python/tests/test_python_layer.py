"""The "Python" layer type: in nets built from Python and from the crema CLI, TRAIN and TEST."""
import os
import subprocess

import numpy as np
import pytest

import crema

NET = """
name: "regression"
layer {{ name: "data" type: "DummyData" top: "data" top: "target"
        dummy_data_param {{ shape {{ dim: 8 dim: 5 }} shape {{ dim: 8 dim: 3 }}
                           data_filler {{ type: "gaussian" }} data_filler {{ type: "gaussian" }} }} }}
layer {{ name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param {{ num_output: 3 weight_filler {{ type: "gaussian" std: 0.3 }}
                              bias_filler {{ type: "constant" value: 0.1 }} }} }}
{loss}
"""
BUILTIN_LOSS = ('layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "target" '
                'top: "loss" }')
PYTHON_LOSS = ('layer { name: "loss" type: "Python" bottom: "ip" bottom: "target" top: "loss" '
               'loss_weight: 1 python_param { module: "pyloss" layer: "EuclideanLossLayer" } }')
STEPS = 20


def write_solver(tmp_path, name, loss):
    net = tmp_path / (name + '.prototxt')
    net.write_text(NET.format(loss=loss))
    solver = tmp_path / (name + '_solver.prototxt')
    solver.write_text('net: "%s" base_lr: 0.05 momentum: 0.9 weight_decay: 0.001 '
                      'lr_policy: "fixed" max_iter: %d display: 0 random_seed: 1701 '
                      'snapshot_prefix: "%s/%s"' % (net, STEPS, tmp_path, name))
    return solver, net


def trained_weights(solver_file):
    solver = crema.get_solver(str(solver_file))
    solver.step(STEPS)
    return [b.data.copy() for b in solver.net.params['ip']], solver


def test_python_euclidean_loss_trains_like_the_builtin(tmp_path):
    builtin, _ = write_solver(tmp_path, 'builtin', BUILTIN_LOSS)
    python, _ = write_solver(tmp_path, 'python', PYTHON_LOSS)
    expected, s1 = trained_weights(builtin)
    got, s2 = trained_weights(python)
    assert s2.net.layer_types[-1] == 'Python'
    # The weights moved, and the Python loss moved them the same way.
    assert np.abs(expected[0] - s1.net.params['ip'][0].data).max() == 0
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, rtol=0, atol=1e-6)
    initial = crema.Net(str(tmp_path / 'builtin.prototxt'), crema.TRAIN).params['ip'][1].data
    assert np.abs(expected[1] - initial).max() > 1e-3
    # The loss the net reports is the built-in one's.
    crema.set_random_seed(5)
    python_loss = float(s2.net.forward()['loss'])
    crema.set_random_seed(5)
    np.testing.assert_allclose(python_loss, float(s1.net.forward()['loss']), rtol=1e-5)


def test_python_layer_in_test_phase_with_param_str_and_blobs(tmp_path):
    net_file = tmp_path / 'net.prototxt'
    net_file.write_text("""
layer { name: "data" type: "Input" top: "a" top: "b"
        input_param { shape { dim: 2 dim: 3 } shape { dim: 2 dim: 3 } } }
layer { name: "twice" type: "Python" bottom: "a" top: "a2"
        python_param { module: "pyloss" layer: "TimesTwoLayer" } }
layer { name: "loss" type: "Python" bottom: "a2" bottom: "b" top: "loss" loss_weight: 1
        python_param { module: "pyloss" layer: "EuclideanLossLayer" param_str: "3.0" } }
""")
    net = crema.Net(str(net_file), crema.TEST)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((2, 3), dtype=np.float32)
    out = net.forward(a=a, b=b)
    np.testing.assert_allclose(out['loss'], 3.0 * np.sum((2 * a - b) ** 2) / 2 / 2, rtol=1e-6)
    assert len(net.params['twice']) == 1 and net.params['twice'][0].data[0] == 2.0


def test_python_layer_errors_name_the_layer(tmp_path):
    net_file = tmp_path / 'net.prototxt'
    net_file.write_text("""
layer { name: "data" type: "Input" top: "a" input_param { shape { dim: 2 } } }
layer { name: "broken" type: "Python" bottom: "a" top: "loss" loss_weight: 1
        python_param { module: "pyloss" layer: "EuclideanLossLayer" } }
""")
    with pytest.raises(RuntimeError, match='broken.*needs two bottoms'):
        crema.Net(str(net_file), crema.TEST)
    net_file.write_text('layer { name: "p" type: "Python" top: "x" '
                        'python_param { module: "no_such_module_xyz" layer: "L" } }')
    with pytest.raises(RuntimeError, match='no_such_module_xyz'):
        crema.Net(str(net_file), crema.TEST)


def test_cli_trains_a_net_with_a_python_layer(tmp_path, crema_bin):
    builtin, _ = write_solver(tmp_path, 'builtin', BUILTIN_LOSS)
    python, python_net = write_solver(tmp_path, 'python', PYTHON_LOSS)
    expected, _ = trained_weights(builtin)
    env = dict(os.environ)
    here = os.path.dirname(os.path.abspath(__file__))
    env['PYTHONPATH'] = here + os.pathsep + env.get('PYTHONPATH', '')
    run = subprocess.run([crema_bin, 'train', '--solver', str(python), '--progress', 'off'],
                         env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    trained = crema.Net(str(python_net), str(tmp_path / ('python_iter_%d.caffemodel' % STEPS)),
                        crema.TRAIN)
    for e, g in zip(expected, (b.data for b in trained.params['ip'])):
        np.testing.assert_allclose(g, e, rtol=0, atol=1e-6)
    # A missing module is a one-line error, exit 1.
    python_net.write_text(NET.format(loss=PYTHON_LOSS.replace('pyloss', 'no_such_module_xyz')))
    run = subprocess.run([crema_bin, 'train', '--solver', str(python), '--progress', 'off'],
                         env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 1 and 'no_such_module_xyz' in run.stderr

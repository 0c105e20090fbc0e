"""Run by wheel_test.sh with the python of a fresh venv holding only the crema wheel (and its
dependencies), outside the source tree: the installed package imports silently, builds and runs
a net, trains with a solver, and its blobs are numpy views of crema's memory.
usage: wheel_check.py LENET_DEPLOY.prototxt"""
import os
import subprocess
import sys
import tempfile

import numpy as np

deploy = sys.argv[1]
work = tempfile.mkdtemp()

# Importing crema and building a Net prints nothing (warnings and errors only)...
quiet = "import crema; crema.Net(%r, crema.TEST)" % deploy
run = subprocess.run([sys.executable, '-c', quiet], capture_output=True, text=True)
assert run.returncode == 0, run.stderr
assert run.stdout == '' and run.stderr == '', 'import printed:\n' + run.stdout + run.stderr
# ... unless asked: set_log_level, or GLOG_minloglevel as for the CLI.
loud = "import crema; crema.set_log_level('INFO'); crema.Net(%r, crema.TEST)" % deploy
run = subprocess.run([sys.executable, '-c', loud], capture_output=True, text=True)
assert 'Setting up conv1' in run.stderr, run.stderr
run = subprocess.run([sys.executable, '-c', quiet], capture_output=True, text=True,
                     env=dict(os.environ, GLOG_minloglevel='0'))
assert 'Setting up conv1' in run.stderr, run.stderr

import crema  # noqa: E402

site = os.path.dirname(os.path.dirname(os.path.abspath(crema.__file__)))
assert site.startswith(sys.prefix), 'crema comes from %s, not the venv %s' % (site, sys.prefix)
assert crema.get_log_level() == 'WARNING'

# LeNet's deploy net: a forward on random images gives 64 probability rows.
net = crema.Net(deploy, crema.TEST)
rng = np.random.RandomState(0)
data = net.blobs['data'].data
data[...] = rng.rand(*data.shape)
prob = net.forward()['prob']
assert prob.shape == (64, 10), prob.shape
np.testing.assert_allclose(prob.sum(axis=1), 1, rtol=1e-5)

# Zero copy: the array is the blob's memory; a write through it is what the next forward reads.
assert data.ctypes.data == net.blobs['data']._data_ptr() and not data.flags['OWNDATA']
assert prob.ctypes.data == net.blobs['prob']._data_ptr()
before = prob.copy()
data[...] = 0
np.testing.assert_array_equal(net.blobs['data'].data, 0)
after = net.forward()['prob']
assert not np.allclose(after, before)
np.testing.assert_array_equal(prob, after)  # the older view sees the new values: same memory

# A solver on a two-class problem fed through Input blobs: the loss falls.
train = os.path.join(work, 'train.prototxt')
with open(train, 'w') as f:
    f.write("""
layer { name: "data" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 32 dim: 16 } shape { dim: 32 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
        inner_product_param { num_output: 16 weight_filler { type: "xavier" } } }
layer { name: "relu" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
        inner_product_param { num_output: 2 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
""")
solver_file = os.path.join(work, 'solver.prototxt')
with open(solver_file, 'w') as f:
    f.write('net: "%s" base_lr: 0.1 momentum: 0.9 lr_policy: "fixed" max_iter: 100 display: 0 '
            'random_seed: 1 snapshot_prefix: "%s/snap"' % (train, work))
solver = crema.SGDSolver(solver_file)
losses = []
for _ in range(30):
    label = rng.randint(0, 2, size=32)
    solver.net.blobs['label'].data[...] = label
    solver.net.blobs['data'].data[...] = rng.randn(32, 16) + 2.0 * (2 * label[:, None] - 1)
    solver.step(1)
    losses.append(float(solver.net.blobs['loss'].data))
assert solver.iter == 30
assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5]), losses
print('wheel_check: crema %s from %s; forward, 30 solver steps (loss %.3f -> %.3f), zero-copy: ok'
      % (crema.__version__, site, np.mean(losses[:5]), np.mean(losses[-5:])))

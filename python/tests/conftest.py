import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)  # pyloss.py, for the Python layers


def reference_dir():
    return os.environ.get('CREMA_REFERENCE_DIR', os.path.join(ROOT, '..', 'shared', 'reference'))


def reference_required():
    """CREMA_REQUIRE_REFERENCE=1 (.ci/run sets it): missing reference data fails, not skips."""
    return os.environ.get('CREMA_REQUIRE_REFERENCE', '') not in ('', '0')


@pytest.fixture
def fmnist():
    """The Fashion-MNIST LMDBs: ../shared/reference/bvlc/fmnist_small, else data/fashion_mnist."""
    small = os.path.join(reference_dir(), 'bvlc', 'fmnist_small')
    if os.path.isdir(os.path.join(small, 'train_lmdb')):
        return os.path.join(small, 'train_lmdb'), os.path.join(small, 'test_lmdb')
    if reference_required():
        pytest.fail('reference data not found: %s (CREMA_REQUIRE_REFERENCE=1)' % small)
    full = os.path.join(ROOT, 'data', 'fashion_mnist')
    if os.path.isdir(os.path.join(full, 'fashion_mnist_train_lmdb')):
        return (os.path.join(full, 'fashion_mnist_train_lmdb'),
                os.path.join(full, 'fashion_mnist_test_lmdb'))
    pytest.skip('no Fashion-MNIST LMDBs')


@pytest.fixture
def crema_bin():
    path = os.environ.get('CREMA_BIN', os.path.join(ROOT, 'build', 'crema'))
    if not os.path.exists(path):
        pytest.skip('no crema executable')
    return path

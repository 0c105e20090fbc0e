"""The tutorial scripts in docs/python run, short, on Fashion-MNIST."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(ROOT, 'docs', 'python')


def run(script, *args):
    result = subprocess.run([sys.executable, os.path.join(DOCS, script)] + list(args),
                            capture_output=True, text=True, check=False, env=dict(os.environ))
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_learning_lenet_then_fine_tuning(tmp_path, fmnist):
    train, test = fmnist
    out = run('01_learning_lenet.py', '--train', train, '--test', test, '--iters', '40',
              '--out', str(tmp_path / 'lenet'))
    first, last = map(float, re.search(r'first loss ([\d.]+), last loss ([\d.]+)', out).groups())
    accuracy = float(re.search(r'final test accuracy ([\d.]+)', out).group(1))
    assert last < first and accuracy > 0.4  # 10 classes: chance is 0.1
    weights = str(tmp_path / 'lenet' / 'lenet_final.caffemodel')
    out = run('02_fine_tuning.py', '--weights', weights, '--train', train, '--test', test,
              '--iters', '15', '--out', str(tmp_path / 'ft'))
    assert 'frozen conv1 kept the trained weights: True' in out
    ft, scratch = map(float, re.search(r'fine-tuned accuracy ([\d.]+), from scratch ([\d.]+)',
                                       out).groups())
    assert ft > scratch

"""crema's .npy writer (src/io/npy.cpp), checked with NumPy's own reader.

`crema forward` writes each net output as DIR/<blob>.npy; these outputs have 0 to 4 axes, so the
header's shape tuple takes each of Python's forms: (), (120,), (2, 60) and (2, 3, 4, 5).
"""
import os
import subprocess

import numpy as np

NET = """name: "npy"
layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 dim: 4 dim: 5 } } }
layer { name: "y" type: "Power" bottom: "x" top: "y" power_param { scale: 2 shift: 1 } }
layer { name: "total" type: "Reduction" bottom: "x" top: "total" }
layer { name: "flat" type: "Flatten" bottom: "x" top: "flat" }
layer { name: "vec" type: "Reshape" bottom: "x" top: "vec" reshape_param { shape { dim: -1 } } }
"""


def read_header(path):
    with open(path, 'rb') as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            header = np.lib.format.read_array_header_1_0(f)
        else:
            header = np.lib.format.read_array_header_2_0(f)
        return version, header, f.tell()


def test_forward_outputs_read_back_with_numpy(tmp_path, crema_bin):
    net = tmp_path / 'net.prototxt'
    net.write_text(NET)
    x = (np.arange(120, dtype=np.float64).reshape(2, 3, 4, 5) - 60) / 7
    np.save(tmp_path / 'x.npy', x)
    out = tmp_path / 'out'
    run = subprocess.run([crema_bin, 'forward', '--model', str(net), '--input',
                          'x=%s' % (tmp_path / 'x.npy'), '--output_dir', str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    x32 = x.astype(np.float32)
    expected = {
        'y': 2 * x32 + 1,
        'total': np.array(x32.sum(dtype=np.float64), dtype=np.float32),
        'flat': x32.reshape(2, 60),
        'vec': x32.reshape(120),
    }
    assert sorted(os.listdir(out)) == sorted(name + '.npy' for name in expected)
    for name, want in expected.items():
        path = str(out / (name + '.npy'))
        version, (shape, fortran_order, dtype), offset = read_header(path)
        assert version == (1, 0), name
        assert shape == want.shape, name
        assert not fortran_order, name
        assert dtype == np.dtype('<f4'), name
        assert offset % 64 == 0, (name, offset)  # the header is padded as NumPy pads it
        assert os.path.getsize(path) == offset + 4 * want.size, name
        got = np.load(path, allow_pickle=False)
        assert got.dtype == np.float32 and got.shape == want.shape, name
        # Reduction sums in float32: a looser bound for its one value.
        atol = 1e-4 if name == 'total' else 1e-6
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=atol, err_msg=name)
        # The bytes after the header are the values in C order, exactly.
        if name != 'total':
            with open(path, 'rb') as f:
                f.seek(offset)
                raw = np.frombuffer(f.read(), dtype='<f4')
            assert np.array_equal(raw, got.ravel(order='C')), name

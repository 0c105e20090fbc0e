"""NetSpec, crema.draw / `crema draw`, and crema.io."""
import os
import shutil
import subprocess

import numpy as np
import pytest

import crema
from crema import layers as L, params as P
from crema import _crema
from crema.proto import crema_pb2
from google.protobuf import text_format

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LENET_TRAIN_TEST = os.path.join(ROOT, 'models', 'lenet', 'lenet_train_test.prototxt')


def lenet(lmdb, batch_size, phase):
    n = crema.NetSpec()
    n.data, n.label = L.Data(batch_size=batch_size, backend=P.Data.LMDB, source=lmdb,
                             transform_param=dict(scale=0.00390625), ntop=2,
                             include=dict(phase=phase))
    n.conv1 = L.Convolution(n.data, kernel_size=5, num_output=20, stride=1,
                            param=[dict(lr_mult=1), dict(lr_mult=2)],
                            weight_filler=dict(type='xavier'), bias_filler=dict(type='constant'))
    n.pool1 = L.Pooling(n.conv1, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.conv2 = L.Convolution(n.pool1, kernel_size=5, num_output=50, stride=1,
                            param=[dict(lr_mult=1), dict(lr_mult=2)],
                            weight_filler=dict(type='xavier'), bias_filler=dict(type='constant'))
    n.pool2 = L.Pooling(n.conv2, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.ip1 = L.InnerProduct(n.pool2, num_output=500, param=[dict(lr_mult=1), dict(lr_mult=2)],
                           weight_filler=dict(type='xavier'), bias_filler=dict(type='constant'))
    n.relu1 = L.ReLU(n.ip1, in_place=True)
    n.ip2 = L.InnerProduct(n.relu1, num_output=10, param=[dict(lr_mult=1), dict(lr_mult=2)],
                           weight_filler=dict(type='xavier'), bias_filler=dict(type='constant'))
    n.loss = L.SoftmaxWithLoss(n.ip2, n.label)
    return n.to_proto()


def structure(net_param, phase):
    return [(l.type, list(l.bottom), list(l.top)) for l in net_param.layer
            if not l.include or any(r.phase == phase for r in l.include)]


def test_net_spec_lenet_matches_the_model_zoo_lenet(tmp_path):
    text = str(lenet('train_lmdb', 64, crema.TRAIN))
    path = tmp_path / 'lenet.prototxt'
    path.write_text(text)
    # Parsed by crema's C++ parser, and structured like models/lenet/lenet_train_test.prototxt.
    parsed = crema_pb2.NetParameter.FromString(_crema._read_net_file(str(path)))
    reference = crema_pb2.NetParameter.FromString(_crema._read_net_file(LENET_TRAIN_TEST))
    got = structure(parsed, crema.TRAIN)
    want = structure(reference, crema.TRAIN)
    assert [layer[0] for layer in want] == ['Data', 'Convolution', 'Pooling', 'Convolution',
                                            'Pooling', 'InnerProduct', 'ReLU', 'InnerProduct',
                                            'SoftmaxWithLoss']
    assert got == want
    assert got[0] == ('Data', [], ['data', 'label'])
    assert got[6] == ('ReLU', ['ip1'], ['ip1'])
    conv1 = parsed.layer[1]
    assert conv1.convolution_param.kernel_size == [5]
    assert conv1.convolution_param.weight_filler.type == 'xavier'
    assert [p.lr_mult for p in conv1.param] == [1, 2]
    assert parsed.layer[2].pooling_param.pool == crema_pb2.PoolingParameter.MAX
    assert parsed.layer[0].include[0].phase == crema.TRAIN
    assert parsed.layer[0].data_param.backend == crema_pb2.DataParameter.LMDB


def test_net_spec_builds_a_net(tmp_path):
    n = crema.NetSpec()
    n.data = L.Input(shape=dict(dim=[2, 4]))
    n.ip = L.InnerProduct(n.data, num_output=3, weight_filler=dict(type='constant', value=0.5))
    n.prob = L.Softmax(n.ip)
    net = crema.Net(n.to_proto(), crema.TEST)
    assert net.layer_types == ['Input', 'InnerProduct', 'Softmax']
    out = net.forward(data=np.ones((2, 4), dtype=np.float32))
    np.testing.assert_allclose(out['prob'], np.full((2, 3), 1 / 3.), rtol=1e-6)
    with pytest.raises(AttributeError, match='no_such_field'):
        n.bad = L.InnerProduct(n.data, no_such_field=1)
        n.to_proto()


@pytest.mark.skipif(shutil.which('dot') is None, reason='no graphviz dot')
def test_draw_png_svg_and_cli(tmp_path, crema_bin):
    import crema.draw
    param = text_format.Parse(open(LENET_TRAIN_TEST).read(), crema_pb2.NetParameter())
    dot = crema.draw.net_to_dot(param, 'TB', phase=crema.TEST)
    assert 'rankdir=TB' in dot and 'conv1' in dot and 'Accuracy' in dot
    assert crema.draw.net_to_dot(param, phase=crema.TRAIN).count('(Data)') == 1
    png = tmp_path / 'lenet.png'
    crema.draw.draw_net_to_file(param, str(png), 'LR')
    assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    svg = tmp_path / 'lenet.svg'
    crema.draw.draw_net_to_file(LENET_TRAIN_TEST, str(svg), 'BT')
    assert b'<svg' in svg.read_bytes() and b'conv2' in svg.read_bytes()
    with pytest.raises(ValueError, match='rankdir'):
        crema.draw.net_to_dot(param, 'XY')
    out = tmp_path / 'cli.svg'
    run = subprocess.run([crema_bin, 'draw', LENET_TRAIN_TEST, str(out), '--rankdir', 'TB'],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert b'<svg' in out.read_bytes()
    # Without dot on PATH: a one-line runtime error, exit 1.
    run = subprocess.run([crema_bin, 'draw', LENET_TRAIN_TEST, str(tmp_path / 'x.png')],
                         env=dict(os.environ, PATH=str(tmp_path)), capture_output=True,
                         text=True, check=False)
    assert run.returncode == 1 and 'graphviz' in run.stderr


def test_transformer_round_trip():
    t = crema.io.Transformer({'data': (1, 3, 4, 5)})
    t.set_transpose('data', (2, 0, 1))
    t.set_channel_swap('data', (2, 1, 0))
    t.set_raw_scale('data', 255)
    t.set_mean('data', np.array([10., 20., 30.]))
    t.set_input_scale('data', 0.5)
    rng = np.random.RandomState(0)
    image = rng.rand(4, 5, 3).astype(np.float32)
    x = t.preprocess('data', image)
    assert x.shape == (3, 4, 5) and x.dtype == np.float32
    # By hand: HWC RGB -> CHW BGR, *255, - per-channel mean, *0.5.
    expected = (image.transpose(2, 0, 1)[::-1] * 255 - np.array([10., 20., 30.])[:, None, None]) \
        * 0.5
    np.testing.assert_allclose(x, expected, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(t.deprocess('data', x), image, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError):
        t.set_mean('data', np.zeros(4))


def test_load_resize_and_oversample(tmp_path):
    if not _crema.has_opencv:
        pytest.skip('built without OpenCV')
    # A 2x3 PPM written by hand: known RGB values.
    pixels = np.array([[[255, 0, 0], [0, 255, 0], [0, 0, 255]],
                       [[10, 20, 30], [40, 50, 60], [70, 80, 90]]], dtype=np.uint8)
    path = tmp_path / 'im.ppm'
    path.write_bytes(b'P6 3 2 255\n' + pixels.tobytes())
    im = crema.io.load_image(str(path))
    assert im.shape == (2, 3, 3) and im.dtype == np.float32
    np.testing.assert_allclose(im, pixels / 255., atol=1e-6)
    grey = crema.io.load_image(str(path), color=False)
    assert grey.shape == (2, 3, 1)
    big = crema.io.resize_image(im, (4, 6), interp_order=0)
    assert big.shape == (4, 6, 3)
    np.testing.assert_allclose(big[::2, ::2], im, atol=1e-6)
    crops = crema.io.oversample([np.arange(5 * 5 * 1, dtype=np.float32).reshape(5, 5, 1)], (3, 3))
    assert crops.shape == (10, 3, 3, 1)
    np.testing.assert_array_equal(crops[0, :, :, 0], np.arange(25).reshape(5, 5)[:3, :3])
    np.testing.assert_array_equal(crops[5], crops[0][:, ::-1])

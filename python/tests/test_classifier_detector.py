"""crema.Classifier, crema.Detector and the crema.io helpers they use (Transformer, oversample),
checked against crops and preprocessing computed by hand here, in float64."""
import numpy as np
import pytest

import crema
from crema import _crema

# Input -> Flatten: the net's output is exactly the preprocessed crop it was given.
FLAT_NET = """
name: "flat"
layer { name: "data" type: "Input" top: "data"
        input_param { shape { dim: %d dim: 3 dim: %d dim: %d } } }
layer { name: "flat" type: "Flatten" bottom: "data" top: "flat" }
"""

# Input -> InnerProduct (5 outputs) -> Softmax.
SOFTMAX_NET = """
name: "ipsoft"
layer { name: "data" type: "Input" top: "data"
        input_param { shape { dim: 3 dim: 3 dim: 4 dim: 4 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 5 } }
layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" }
"""

MEAN = np.array([0.25, 0.5, 0.75])  # per channel, in the net's (BGR) order, raw-scaled units
SWAP = (2, 1, 0)
RAW = 2.0
SCALE = 3.0


def write_net(tmp_path, text, params=None):
    """The prototxt and a .caffemodel (params: {layer: [arrays]}) for `text`."""
    proto = tmp_path / 'net.prototxt'
    proto.write_text(text)
    net = crema.Net(str(proto), crema.TEST)
    for layer, arrays in (params or {}).items():
        for blob, value in zip(net.params[layer], arrays):
            blob.data[...] = value
    weights = tmp_path / 'net.caffemodel'
    net.save(str(weights))
    return str(proto), str(weights)


def by_hand(crop):
    """HxWx3 RGB crop -> the expected net input, element by element in float64: BGR order,
    times RAW, minus MEAN of the output channel, times SCALE."""
    h, w, _ = crop.shape
    out = np.empty((3, h, w))
    for c in range(3):
        for y in range(h):
            for x in range(w):
                out[c, y, x] = (crop[y, x, SWAP[c]] * RAW - MEAN[c]) * SCALE
    return out


def distinct_image(h, w, offset=0.0):
    """Every pixel and channel a different value."""
    return (np.arange(h * w * 3, dtype=np.float64).reshape(h, w, 3) + offset) / 100.0


OPTIONS = dict(mean=MEAN, raw_scale=RAW, channel_swap=SWAP, input_scale=SCALE)


def test_classifier_centre_crop(tmp_path):
    proto, weights = write_net(tmp_path, FLAT_NET % (2, 4, 4))
    net = crema.Classifier(proto, weights, image_dims=(7, 8), **OPTIONS)
    np.testing.assert_array_equal(net.crop_dims, [4, 4])
    images = [distinct_image(7, 8), distinct_image(7, 8, offset=1000.0), distinct_image(7, 8, 7)]
    out = net.predict(images, oversample=False)  # 3 images through a batch of 2
    assert out.shape == (3, 48)
    for image, row in zip(images, out):
        # (7 - 4) // 2 = 1 rows and (8 - 4) // 2 = 2 columns before the centre crop.
        np.testing.assert_allclose(row, by_hand(image[1:5, 2:6]).ravel(), rtol=1e-5, atol=1e-4)


def test_classifier_oversample_averages_the_ten_crops(tmp_path):
    proto, weights = write_net(tmp_path, FLAT_NET % (4, 3, 4))
    net = crema.Classifier(proto, weights, image_dims=(6, 7), **OPTIONS)
    images = [distinct_image(6, 7), distinct_image(6, 7, offset=500.0)]
    out = net.predict(images)
    assert out.shape == (2, 36)
    # Crops of 3x4 in 6x7: corners at rows {0, 3} and columns {0, 3}, the centre at (1, 1).
    origins = [(0, 0), (0, 3), (3, 0), (3, 3), (1, 1)]
    for image, row in zip(images, out):
        plain = [image[y:y + 3, x:x + 4] for y, x in origins]
        mirrored = [c[:, ::-1] for c in plain]
        expected = np.mean([by_hand(c) for c in plain + mirrored], axis=0)
        np.testing.assert_allclose(row, expected.ravel(), rtol=1e-5, atol=1e-4)


def test_classifier_predict_matches_a_manual_forward(tmp_path):
    rng = np.random.RandomState(3)
    w = rng.randn(5, 48) * 0.1
    b = rng.randn(5)
    proto, weights = write_net(tmp_path, SOFTMAX_NET, {'ip': [w, b]})
    net = crema.Classifier(proto, weights, image_dims=(5, 6), **OPTIONS)
    images = [rng.rand(5, 6, 3) for _ in range(2)]

    def softmax_forward(crop):
        z = w @ by_hand(crop).ravel() + b
        e = np.exp(z - z.max())
        return e / e.sum()

    centre = net.predict(images, oversample=False)
    ten = net.predict(images, oversample=True)
    assert centre.shape == (2, 5) and ten.shape == (2, 5)
    origins = [(0, 0), (0, 2), (1, 0), (1, 2), (0, 1)]  # 4x4 crops of 5x6
    for i, image in enumerate(images):
        np.testing.assert_allclose(centre[i], softmax_forward(image[0:4, 1:5]), rtol=1e-4,
                                   atol=1e-6)
        crops = [image[y:y + 4, x:x + 4] for y, x in origins]
        crops += [c[:, ::-1] for c in crops]
        expected = np.mean([softmax_forward(c) for c in crops], axis=0)
        np.testing.assert_allclose(ten[i], expected, rtol=1e-4, atol=1e-6)
        assert abs(ten[i].sum() - 1) < 1e-5


def test_classifier_resizes_to_image_dims(tmp_path):
    if not _crema.has_opencv:
        pytest.skip('built without OpenCV')
    proto, weights = write_net(tmp_path, FLAT_NET % (1, 4, 4))
    net = crema.Classifier(proto, weights, image_dims=(6, 6), **OPTIONS)
    image = distinct_image(3, 5)
    resized = crema.io.resize_image(image, (6, 6))
    np.testing.assert_allclose(net.predict([image], oversample=False)[0],
                               by_hand(resized[1:5, 1:5]).ravel(), rtol=1e-5, atol=1e-4)
    # A constant image stays constant whatever the interpolation.
    flat = np.full((3, 5, 3), 0.4)
    for order in (0, 1, 3):
        np.testing.assert_allclose(crema.io.resize_image(flat, (7, 2), order),
                                   np.full((7, 2, 3), 0.4), atol=1e-6)


def detector(tmp_path, context_pad, size=4):
    proto, weights = write_net(tmp_path, FLAT_NET % (2, size, size))
    return crema.Detector(proto, weights, context_pad=context_pad, **OPTIONS)


def test_detector_windows_without_context(tmp_path):
    net = detector(tmp_path, None)
    a, b = distinct_image(8, 10), distinct_image(6, 6, offset=300.0)
    windows_a = [(1, 2, 5, 6), (4, 6, 8, 10)]
    windows_b = [(0, 0, 4, 4)]
    dets = net.detect_windows([(a, windows_a), (b, windows_b)])
    assert len(dets) == 3
    assert [d['window'] for d in dets] == windows_a + windows_b
    assert all(d['filename'] is None for d in dets)
    for det, crop in zip(dets, [a[1:5, 2:6], a[4:8, 6:10], b[0:4, 0:4]]):
        np.testing.assert_allclose(det['prediction'], by_hand(crop).ravel(), rtol=1e-5,
                                   atol=1e-4)


def image_space_mean():
    """The RGB pixel that preprocessing maps to MEAN, i.e. to zero."""
    pixel = np.empty(3)
    for c in range(3):
        pixel[SWAP[c]] = MEAN[c] / RAW
    return pixel


def test_detector_context_pad_geometry(tmp_path):
    # Input 4x4, context_pad 1: the window grows by 4 / (4 - 2) = 2 about its centre (its
    # extent measured inclusively), the grown box is warped to 4 pixels.
    net = detector(tmp_path, 1)
    image = distinct_image(8, 10)
    fill = image_space_mean()
    cases = []
    # (2, 3, 3, 4): extent 2, centre (3, 4); grown box rows 1..5, columns 2..6 (extent 5), so
    # the warp is 4/5 and image[1:5, 2:6] fills the 4x4 canvas as it is.
    cases.append(((2, 3, 3, 4), image[1:5, 2:6]))
    # (0, 0, 1, 1): grown box -1..3 in both axes; round(1 * 4/5) = 1 row and column of mean
    # before the image, then image[0:3, 0:3] (3 = round(4 * 4/5) pixels).
    canvas = np.tile(fill, (4, 4, 1))
    canvas[1:4, 1:4] = image[0:3, 0:3]
    cases.append(((0, 0, 1, 1), canvas))
    # (6, 8, 7, 9): grown box rows 5..9, columns 7..11, clipped to the 8x10 image: rows 5..8,
    # columns 7..10, i.e. image[5:8, 7:10] in the top-left 3x3, mean after it.
    canvas = np.tile(fill, (4, 4, 1))
    canvas[0:3, 0:3] = image[5:8, 7:10]
    cases.append(((6, 8, 7, 9), canvas))
    dets = net.detect_windows([(image, [w for w, _ in cases])])
    for det, (window, expected) in zip(dets, cases):
        assert det['window'] == window
        np.testing.assert_allclose(det['prediction'], by_hand(expected).ravel(), rtol=1e-5,
                                   atol=1e-4)
    # The mean-filled border is zero once preprocessed.
    border = dets[1]['prediction'].reshape(3, 4, 4)
    np.testing.assert_allclose(border[:, 0, :], 0, atol=1e-5)
    np.testing.assert_allclose(border[:, :, 0], 0, atol=1e-5)


def test_detector_context_pad_with_resize(tmp_path):
    if not _crema.has_opencv:
        pytest.skip('built without OpenCV')
    net = detector(tmp_path, 1)
    value = np.array([0.1, 0.6, 0.3])
    image = np.tile(value, (8, 10, 1))  # constant, so the resize keeps the values
    # (0, 0, 3, 3): extent 4, centre (2, 2), grown box -2..6 (extent 9, warp 4/9);
    # round(2 * 4/9) = 1 row/column of mean, then image[0:6, 0:6] shrunk to round(7 * 4/9) = 3.
    det, = net.detect_windows([(image, [(0, 0, 3, 3)])])
    expected = np.tile(image_space_mean(), (4, 4, 1))
    expected[1:4, 1:4] = value
    np.testing.assert_allclose(det['prediction'], by_hand(expected).ravel(), rtol=1e-5,
                               atol=1e-4)
    # (1, 1, 3, 3): extent 3, centre 2.5, grown box -0.5..5.5, rounded half to even: 0..6, so
    # no mean at all (flooring would give -1..5 and a row and column of mean).
    det, = net.detect_windows([(image, [(1, 1, 3, 3)])])
    np.testing.assert_allclose(det['prediction'], by_hand(np.tile(value, (4, 4, 1))).ravel(),
                               rtol=1e-5, atol=1e-4)


def test_detector_reads_files(tmp_path):
    if not _crema.has_opencv:
        pytest.skip('built without OpenCV')
    pixels = (np.arange(6 * 7 * 3) * 2 % 256).astype(np.uint8).reshape(6, 7, 3)
    path = tmp_path / 'im.ppm'
    path.write_bytes(b'P6 7 6 255\n' + pixels.tobytes())
    net = detector(tmp_path, None)
    det, = net.detect_windows([(str(path), [(2, 1, 6, 5)])])
    assert det['filename'] == str(path)
    np.testing.assert_allclose(det['prediction'], by_hand(pixels[2:6, 1:5] / 255.).ravel(),
                               rtol=1e-5, atol=1e-4)


def test_detector_rejects_bad_windows(tmp_path):
    net = detector(tmp_path, None)
    image = distinct_image(5, 5)
    for window in [(3, 0, 2, 4), (0, 0, 4), (9, 9, 12, 12)]:
        with pytest.raises(ValueError):
            net.detect_windows([(image, [window])])
    assert net.detect_windows([(image, [])]) == []
    with pytest.raises(ValueError):
        detector(tmp_path, 2)  # nothing of a 4x4 input left for the window


def test_transformer_order_of_operations():
    t = crema.io.Transformer({'data': (1, 2, 3, 2)})
    t.set_transpose('data', (2, 0, 1))
    t.set_channel_swap('data', (1, 0))
    t.set_raw_scale('data', 10.0)
    mean = np.arange(12, dtype=np.float64).reshape(2, 3, 2)  # a full CxHxW mean
    t.set_mean('data', mean)
    t.set_input_scale('data', 0.5)
    image = np.arange(12, dtype=np.float64).reshape(3, 2, 2) / 7.0
    out = t.preprocess('data', image)
    expected = np.empty((2, 3, 2))
    for c in range(2):
        for y in range(3):
            for x in range(2):
                # The mean is indexed by the output channel: subtracted after the swap and the
                # raw scale, before the input scale.
                expected[c, y, x] = 0.5 * (10.0 * image[y, x, 1 - c] - mean[c, y, x])
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    np.testing.assert_allclose(t.deprocess('data', out), image, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t.deprocess('data', out[None]), image, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError):
        t.set_mean('data', np.zeros((2, 3, 3)))
    with pytest.raises(ValueError):
        t.set_channel_swap('data', (2, 1, 0))
    with pytest.raises(ValueError):
        t.set_transpose('data', (1, 0))
    with pytest.raises(ValueError):
        t.preprocess('other', image)


def test_transformer_single_channel_round_trip():
    t = crema.io.Transformer({'data': (1, 1, 2, 3)})
    t.set_transpose('data', (2, 0, 1))
    t.set_mean('data', [0.5])
    image = np.arange(6, dtype=np.float32).reshape(2, 3, 1)
    out = t.preprocess('data', image)
    np.testing.assert_allclose(out, image.transpose(2, 0, 1) - 0.5)
    back = t.deprocess('data', out)
    assert back.shape == (2, 3, 1)
    np.testing.assert_allclose(back, image)


def test_oversample_order_for_several_images():
    images = [distinct_image(5, 6, offset=k * 1000.0) for k in range(2)]
    crops = crema.io.oversample(images, (2, 3))
    assert crops.shape == (20, 2, 3, 3) and crops.dtype == np.float32
    # Corners: rows {0, 3}, columns {0, 3}; centre: ((5-2)//2, (6-3)//2) = (1, 1).
    origins = [(0, 0), (0, 3), (3, 0), (3, 3), (1, 1)]
    for k, image in enumerate(images):
        for i, (y, x) in enumerate(origins):
            region = image[y:y + 2, x:x + 3]
            np.testing.assert_allclose(crops[10 * k + i], region, rtol=1e-6)
            np.testing.assert_allclose(crops[10 * k + 5 + i], region[:, ::-1], rtol=1e-6)
    with pytest.raises(ValueError):
        crema.io.oversample(images, (6, 3))


def test_blobproto_and_datum_helpers():
    arr = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    blob = crema.io.array_to_blobproto(arr, diff=-arr)
    assert list(blob.shape.dim) == [2, 3, 4]
    np.testing.assert_array_equal(crema.io.blobproto_to_array(blob), arr)
    np.testing.assert_array_equal(crema.io.blobproto_to_array(blob, return_diff=True), -arr)
    legacy = crema.io.array_to_blobproto(np.zeros(1))
    del legacy.shape.dim[:]
    del legacy.data[:]
    legacy.num, legacy.channels, legacy.height, legacy.width = 1, 2, 1, 3
    legacy.data.extend([1, 2, 3, 4, 5, 6])
    np.testing.assert_array_equal(crema.io.blobproto_to_array(legacy),
                                  [[[[1, 2, 3]], [[4, 5, 6]]]])
    arrays = [arr, np.ones((1, 2))]
    back = crema.io.blobprotovector_str_to_arraylist(
        crema.io.arraylist_to_blobprotovector_str(arrays))
    assert len(back) == 2
    for a, b in zip(arrays, back):
        np.testing.assert_array_equal(a, b)
    pixels = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    datum = crema.io.array_to_datum(pixels, label=7)
    assert (datum.channels, datum.height, datum.width, datum.label) == (2, 3, 4, 7)
    assert datum.data == pixels.tobytes()
    np.testing.assert_array_equal(crema.io.datum_to_array(datum), pixels)
    floats = crema.io.datum_to_array(crema.io.array_to_datum(arr / 3))
    np.testing.assert_allclose(floats, arr / 3, rtol=1e-6)

"""LeNet written with NetSpec (shared by the two tutorial scripts)."""
import crema
from crema import layers as L, params as P


def lenet(lmdb, batch_size, classifier='ip2', num_output=10, frozen=False):
    """LeNet on a Fashion-MNIST LMDB. `classifier` names the last layer (a new name makes it
    start from fresh weights when fine-tuning); `frozen` sets lr_mult 0 on the layers before it."""
    learn = [dict(lr_mult=0), dict(lr_mult=0)] if frozen else [dict(lr_mult=1), dict(lr_mult=2)]
    n = crema.NetSpec()
    n.data, n.label = L.Data(batch_size=batch_size, backend=P.Data.LMDB, source=lmdb,
                             transform_param=dict(scale=1. / 255), ntop=2)
    n.conv1 = L.Convolution(n.data, kernel_size=5, num_output=20, param=learn,
                            weight_filler=dict(type='xavier'))
    n.pool1 = L.Pooling(n.conv1, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.conv2 = L.Convolution(n.pool1, kernel_size=5, num_output=50, param=learn,
                            weight_filler=dict(type='xavier'))
    n.pool2 = L.Pooling(n.conv2, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.fc1 = L.InnerProduct(n.pool2, num_output=500, param=learn,
                           weight_filler=dict(type='xavier'))
    n.relu1 = L.ReLU(n.fc1, in_place=True)
    n[classifier] = L.InnerProduct(n.relu1, num_output=num_output,
                                   param=[dict(lr_mult=1), dict(lr_mult=2)],
                                   weight_filler=dict(type='xavier'))
    n.loss = L.SoftmaxWithLoss(n[classifier], n.label)
    return n.to_proto()


def write_solver(path, train_net, test_net, base_lr=0.01, max_iter=200, prefix='lenet'):
    with open(path, 'w') as f:
        f.write('train_net: "%s"\ntest_net: "%s"\ntest_iter: 5\ntest_interval: 100000\n'
                'base_lr: %g\nmomentum: 0.9\nweight_decay: 0.0005\nlr_policy: "inv"\n'
                'gamma: 0.0001\npower: 0.75\ndisplay: 0\nmax_iter: %d\nsnapshot_prefix: "%s"\n'
                'random_seed: 1\n' % (train_net, test_net, base_lr, max_iter, prefix))


def test_accuracy(net, batches, classifier='ip2'):
    """Accuracy over `batches` test batches, computed in Python from the scores."""
    correct = total = 0
    for _ in range(batches):
        net.forward()
        scores = net.blobs[classifier].data
        labels = net.blobs['label'].data
        correct += int((scores.argmax(1) == labels).sum())
        total += len(labels)
    return correct / total

"""NetSpec: nets written as Python code, as pycaffe's caffe.net_spec.

    from crema import layers as L, params as P
    n = crema.NetSpec()
    n.data, n.label = L.Data(batch_size=64, backend=P.Data.LMDB, source='train_lmdb',
                             transform_param=dict(scale=1. / 255), ntop=2)
    n.conv1 = L.Convolution(n.data, kernel_size=5, num_output=20, weight_filler=dict(type='xavier'))
    str(n.to_proto())   # prototxt text

Keyword arguments that are LayerParameter fields (include, loss_weight, param, propagate_down,
phase, ...) go to the layer; the others go to the layer type's *_param message. `ntop` sets the
number of tops, `in_place=True` makes the top the bottom. P.<Type>.<ENUM> is a protobuf enum value.
"""
from collections import OrderedDict

from .proto import crema_pb2

# Layer types whose parameters live in another type's message.
_PARAM_FIELD_EXCEPTIONS = {'Deconvolution': 'convolution_param',
                           'ConvolutionDepthwise': 'convolution_param',
                           'DepthwiseConvolution': 'convolution_param'}


def _param_fields():
    """Layer type -> the name of its *_param field in LayerParameter."""
    fields = {}
    for field in crema_pb2.LayerParameter.DESCRIPTOR.fields:
        if field.name.endswith('_param') and field.message_type is not None:
            type_name = field.message_type.name
            if type_name.endswith('Parameter'):
                fields[type_name[:-len('Parameter')]] = field.name
    fields.update(_PARAM_FIELD_EXCEPTIONS)
    return fields


_PARAM_FIELDS = _param_fields()


def param_name_of(layer_type):
    """The LayerParameter field holding `layer_type`'s parameters, e.g. 'convolution_param'."""
    if layer_type in _PARAM_FIELDS:
        return _PARAM_FIELDS[layer_type]
    return layer_type.lower() + '_param'


def assign_proto(proto, name, value):
    """Sets field `name` of message `proto` from a Python value: a dict fills a sub-message,
    a list extends a repeated field (dicts in it add messages)."""
    if isinstance(value, (list, tuple)):
        field = getattr(proto, name)
        for item in value:
            if isinstance(item, dict):
                sub = field.add()
                for k, v in item.items():
                    assign_proto(sub, k, v)
            else:
                field.append(item)
    elif isinstance(value, dict):
        field = proto.DESCRIPTOR.fields_by_name.get(name)
        if field is None:
            raise AttributeError('%s has no field %r' % (proto.DESCRIPTOR.name, name))
        sub = getattr(proto, name)
        if field.label == field.LABEL_REPEATED:
            sub = sub.add()
        for k, v in value.items():
            assign_proto(sub, k, v)
    else:
        field = proto.DESCRIPTOR.fields_by_name.get(name)
        if field is None:
            raise AttributeError('%s has no field %r' % (proto.DESCRIPTOR.name, name))
        if field.label == field.LABEL_REPEATED:
            getattr(proto, name).append(value)
        elif field.message_type is not None:
            getattr(proto, name).CopyFrom(value)
        else:
            setattr(proto, name, value)


class Top:
    """One output of a layer, usable as a bottom of later layers."""

    def __init__(self, fn, n):
        self.fn = fn
        self.n = n

    def to_proto(self):
        """A NetParameter with this top and every layer it depends on."""
        return to_proto(self)

    def _to_proto(self, layers, names, autonames):
        return self.fn._to_proto(layers, names, autonames)


class Function:
    """A layer: its type, bottoms (Tops) and parameters, and its Tops."""

    def __init__(self, type_name, inputs, params):
        self.type_name = type_name
        for i, inp in enumerate(inputs):
            if not isinstance(inp, Top):
                raise TypeError('%s: bottom %d is a %s, not a Top of another layer'
                                % (type_name, i, type(inp).__name__))
        self.inputs = inputs
        self.params = dict(params)
        self.ntop = self.params.pop('ntop', 1)
        self.in_place = self.params.pop('in_place', False)
        if self.in_place and len(inputs) != 1:
            raise ValueError('%s: in_place needs exactly one bottom' % type_name)
        self.tops = tuple(Top(self, n) for n in range(self.ntop))

    def _get_name(self, names, autonames):
        if self not in names and self.ntop > 0:
            names[self] = self._get_top_name(self.tops[0], names, autonames)
        elif self not in names:
            autonames[self.type_name] += 1
            names[self] = self.type_name + str(autonames[self.type_name])
        return names[self]

    def _get_top_name(self, top, names, autonames):
        if top not in names:
            autonames[top.fn.type_name] += 1
            names[top] = top.fn.type_name + str(autonames[top.fn.type_name])
        return names[top]

    def _to_proto(self, layers, names, autonames):
        if self in layers:
            return
        bottom_names = []
        for inp in self.inputs:
            inp._to_proto(layers, names, autonames)
            bottom_names.append(layers[inp.fn].top[inp.n])
        layer = crema_pb2.LayerParameter()
        layer.type = self.type_name
        layer.bottom.extend(bottom_names)
        if self.in_place:
            layer.top.extend(layer.bottom)
        else:
            for top in self.tops:
                layer.top.append(self._get_top_name(top, names, autonames))
        layer.name = self._get_name(names, autonames)
        layer_fields = crema_pb2.LayerParameter.DESCRIPTOR.fields_by_name
        for k, v in self.params.items():
            if k.endswith('param') and k in layer_fields:
                assign_proto(layer, k, v)
            elif k in layer_fields:
                assign_proto(layer, k, v)
            else:
                try:
                    assign_proto(getattr(layer, param_name_of(self.type_name)), k, v)
                except AttributeError as e:
                    raise AttributeError('layer type %s: %s' % (self.type_name, e)) from None
        layers[self] = layer


def to_proto(*tops):
    """A NetParameter with the layers needed for `tops`, in dependency order."""
    layers = OrderedDict()
    autonames = _Counter()
    names = {}
    for top in tops:
        top.fn._to_proto(layers, names, autonames)
    net = crema_pb2.NetParameter()
    net.layer.extend(layers.values())
    return net


class _Counter(dict):
    def __missing__(self, key):
        return 0


class NetSpec:
    """Assign Tops as attributes (n.conv1 = L.Convolution(...)); the attribute names become the
    top (and layer) names in to_proto()."""

    def __init__(self):
        super().__setattr__('tops', OrderedDict())

    def __setattr__(self, name, value):
        self.tops[name] = value

    def __getattr__(self, name):
        try:
            return self.tops[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setitem__(self, key, value):
        self.__setattr__(key, value)

    def __getitem__(self, item):
        return self.__getattr__(item)

    def __delitem__(self, name):
        del self.tops[name]

    def keys(self):
        return list(self.tops.keys())

    def vals(self):
        return list(self.tops.values())

    def to_proto(self):
        """A crema.proto NetParameter; str() of it is prototxt text crema parses."""
        names = {v: k for k, v in self.tops.items()}
        autonames = _Counter()
        layers = OrderedDict()
        for top in self.tops.values():
            top._to_proto(layers, names, autonames)
        net = crema_pb2.NetParameter()
        net.layer.extend(layers.values())
        return net


class Layers:
    """L.<Type>(*bottoms, **params) makes a layer of that type; returns its Top (or a tuple of
    Tops when ntop > 1, None when ntop == 0)."""

    def __getattr__(self, name):
        def layer_fn(*args, **kwargs):
            fn = Function(name, args, kwargs)
            if fn.ntop == 0:
                return fn
            if fn.ntop == 1:
                return fn.tops[0]
            return fn.tops
        return layer_fn


class Parameters:
    """P.<Type>.<NAME>: the enum value NAME of <Type>Parameter, e.g. P.Pooling.MAX."""

    def __getattr__(self, name):
        message = getattr(crema_pb2, name + 'Parameter')

        class Param:
            def __getattr__(self, param_name):
                return getattr(message, param_name)
        return Param()


layers = Layers()
params = Parameters()

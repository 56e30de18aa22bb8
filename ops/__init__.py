"""Op families.  Each module registers its ops at import; imported explicitly here."""

from asyncflow.ops import (  # noqa: F401
    array_ops,
    check_ops,
    control_flow_ops,
    control_flow_prims,
    conv_ops,
    gradient_ops,
    init_ops,
    logging_ops,
    math_ops,
    nn_impl,
    nn_ops,
    pooling_ops,
    random_ops,
    reduction_ops,
    sendrecv_ops,
    slicing_ops,
    training_ops,
    state_ops,
)

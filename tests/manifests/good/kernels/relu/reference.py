"""Placeholder references for the manifest tests (never run)."""


def relu_forward(x):
    return x


def axpy(x, y, alpha):
    return x

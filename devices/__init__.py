"""Devices: the interface every device implements, and the CPU device."""

from asyncflow.devices.base import Device
from asyncflow.devices.cpu import CPUDevice

__all__ = ["Device", "CPUDevice"]

"""The part of the `expecttest` package torch's test utilities use (Debian 12 does not ship it).

torch.testing._internal.common_utils subclasses expecttest.TestCase and reads/sets
expecttest.ACCEPT; the distributed suite asserts no inline expectations.
"""
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    pass

"""Helpers, fakes and servers the tests share (imported as tests.support.*)."""

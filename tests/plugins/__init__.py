"""Audit methods defined outside the fairengine package, for the method-contract tests."""

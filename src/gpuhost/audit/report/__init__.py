"""Audit report writers: terminal table (default), JSON schema 1, JUnit XML, Prometheus textfile."""

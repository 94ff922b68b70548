"""Reporting: what a report looks like to a reader — the summary table, comparisons and HTML.

Pure functions of finished reports (:mod:`.table`, :mod:`.compare`, :mod:`.html`); ``summary``
crawls and prints (:mod:`.summary`).
"""

"""The ``threadline`` command line: Typer commands over the library, Rich output.

Nothing in the library imports this package. Entry point: ``threadline.cli.app:main``.
"""

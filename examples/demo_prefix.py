import os


def list_python_files(root):
    """Return the paths of every .py file below root, sorted."""
    result = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            
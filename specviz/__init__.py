"""specviz: accelerated decoding taught with a real model (the library; the app is app.py, ui/ and views/)."""

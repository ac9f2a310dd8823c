"""Plotly figure builders: traces in, figures out. Nothing here imports streamlit."""

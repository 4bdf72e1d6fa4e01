"""Model-free summaries: cell means, seed spread and the spread test (``variance``), and our cells beside the
2020 blog post's published figures (``reference``).
"""

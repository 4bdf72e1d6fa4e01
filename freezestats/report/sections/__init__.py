"""One module per section of the report that has a job of its own: the blog comparison (``comparisons``), the
fitted model's details (``model_details``), cross against bi encoding (``pair_encoding``), the shared encoder
(``shared_encoder``) and the arms (``arms``).
"""

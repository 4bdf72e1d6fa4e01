"""Analyses of more than one freeze grid: arms against full fine-tuning (``strategies``), tasks alone and with a
shared encoder (``shared_encoder``), bi against cross encoding (``pair_encoding``) and all tasks in one model
(``pooled_tasks``).
"""

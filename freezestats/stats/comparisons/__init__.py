"""Analyses of more than one freeze grid: arm levels against full fine-tuning (``arm_levels``; ``strategies``
keeps its names from before they were renamed), tasks alone and with a shared encoder (``shared_encoder``), bi
against cross encoding (``pair_encoding``) and all tasks in one model (``pooled_tasks``).
"""

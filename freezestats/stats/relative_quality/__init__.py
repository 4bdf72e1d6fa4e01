"""Lee, Tang & Lin (2019): quality relative to full fine-tuning and the fewest layers that keep 90% of it
(``operating_point``, resampled by ``bootstrap``), and the same question as a test on a fitted model
(``ratio_tests``).
"""

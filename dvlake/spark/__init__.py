"""dvlake.spark"""

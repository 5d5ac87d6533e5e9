"""dvlake.log"""

"""Knowledge tiers (task / project / global memory items), context packages, learned layer."""

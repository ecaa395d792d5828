from django import template

from belvedir.core import money

register = template.Library()
register.filter("dollars", money.dollars)
register.filter("dollars_plain", money.plain_dollars)
